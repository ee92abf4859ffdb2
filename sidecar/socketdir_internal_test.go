package sidecar

import (
	"os"
	"strconv"
	"testing"
)

// A recorded owner is alive only if its pid runs with the recorded start
// time (a reused pid is another process); records it cannot read count as
// alive (never remove what cannot be judged).
func TestOwnerAlive(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	start := procStartTime(os.Getpid())
	if start == "" {
		t.Fatal("no start time for this process")
	}
	for record, want := range map[string]bool{
		pid + " " + start + "\n":                        true,
		pid + " " + start + " " + pidNamespace() + "\n": true,
		"999999999 1 " + pidNamespace():                 false, // no such pid
		"999999999 1 pid:[1]":                           true,  // another pid namespace: cannot judge
		pid + " 1":                                      false, // same pid, another start: reused
		pid:                                             true,  // no start time: the pid decides
		"":                                              true,
		"garbage":                                       true,
		"-3 5":                                          true,
	} {
		if got := ownerAlive(record); got != want {
			t.Errorf("ownerAlive(%q) = %v, want %v", record, got, want)
		}
	}
}
