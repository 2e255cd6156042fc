// Package packaging holds the release packaging: systemd units, example
// settings and install scripts, which .goreleaser.yaml puts in the deb and
// rpm packages. It has no code; its test keeps the goreleaser config, the
// units and the generated docs (man/, completions/) in step.
package packaging
