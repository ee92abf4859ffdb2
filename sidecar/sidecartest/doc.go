// Package sidecartest serves a runtime through a real in-process sidecar
// for tests, as net/http/httptest does for handlers: Serve starts a
// sidecar.Server on a Unix socket in a private directory and returns a
// healthy sidecar.Client talking to it over that socket.
//
// RunConformance is the over-the-socket half of the runtime conformance
// suite (the in-process half is runtimes/conformance): every runtime's tests
// run it, so that registration, atomic swaps under traffic, warm-up
// failures and deletion behave alike whatever the runtime, and damaged
// models of every runtime fail as MODEL_EXECUTION with valid UTF-8
// messages.
//
// ModelMemory registers a model in a real sidecar binary and reports the
// process's resident memory relative to the model's file size (each
// runtime's test of it is TestSidecarModelMemory*).
package sidecartest
