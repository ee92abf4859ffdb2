// Package repotest holds tests about the repository as a whole rather than
// one package: rules every tracked file must keep. It has no code of its
// own.
package repotest
