package main

// Man pages and shell completions are generated from the command tree,
// docs/api.md from the endpoint declarations.
//go:generate go run ./internal/docgen/gendocs
