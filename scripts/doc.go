// Package scripts holds no Go code: the directory is the shell scripts make
// runs (installs of native pieces and test servers, the demo, step.sh),
// and its tests run those scripts as real processes.
package scripts
