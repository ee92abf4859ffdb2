//go:build pytorch

package main

func init() {
	versionBinaries = append(versionBinaries, struct {
		pkg   string
		cgo   bool
		flags []string
	}{"cmd/inference-sidecar-pytorch", true, []string{"-tags", "pytorch"}})
}
