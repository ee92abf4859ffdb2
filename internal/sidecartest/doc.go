// Package sidecartest serves a runtime through a real in-process sidecar
// for tests: a sidecar.Server on a Unix socket in a private directory and a
// healthy sidecar.Client talking to it over that socket. It is separate
// from internal/testhelp because it imports package sidecar, whose own
// tests use testhelp.
package sidecartest
