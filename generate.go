package main

// Man pages and shell completions are generated from the command tree.
//go:generate go run ./internal/docgen/gendocs
