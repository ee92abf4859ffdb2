package sidecar_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/sidecar"
)

// TestListenRefusesUnsafeSocketDir: a socket directory that others can
// write to, or that another user owns, is refused with an error naming
// it, its owner or mode, and why; a private one is used.
func TestListenRefusesUnsafeSocketDir(t *testing.T) {
	base := testhelp.ShortDir(t)
	mkdir := func(name string, mode os.FileMode) string {
		t.Helper()
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil { // not subject to the umask
			t.Fatal(err)
		}
		return dir
	}
	cases := []struct {
		dir  string
		want []string
	}{
		{mkdir("world", 0o777), []string{"mode -rwxrwxrwx", "writable by group or others"}},
		{mkdir("sticky", 0o777|os.ModeSticky), []string{"writable by group or others"}},
		{mkdir("group", 0o770), []string{"mode -rwxrwx---", "writable by group or others"}},
	}
	if os.Geteuid() == 0 {
		other := mkdir("other", 0o700)
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			dir  string
			want []string
		}{other, []string{"owned by uid 4242", "not by this user"}})
	} else {
		t.Log("not root: the case of a directory owned by another user is not tested")
	}
	for _, c := range cases {
		lis, err := sidecar.Listen(filepath.Join(c.dir, "s.sock"))
		if err == nil {
			lis.Close()
			t.Errorf("Listen in %s (%v) succeeded", c.dir, c.want)
			continue
		}
		for _, w := range append(c.want, c.dir) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Listen in %s: %v; want it to say %q", c.dir, err, w)
			}
		}
		if _, err := os.Lstat(filepath.Join(c.dir, "s.sock")); !os.IsNotExist(err) {
			t.Errorf("a refused directory got a socket: %v", err)
		}
	}
	// A private directory, or a missing one (created 0700), is fine.
	for _, dir := range []string{mkdir("private", 0o700), mkdir("shared-read", 0o755), filepath.Join(base, "new")} {
		lis, err := sidecar.Listen(filepath.Join(dir, "s.sock"))
		if err != nil {
			t.Errorf("Listen in %s: %v", dir, err)
			continue
		}
		lis.Close()
	}
	if fi, err := os.Stat(filepath.Join(base, "new")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created socket dir: %v, %v; want mode 0700", fi.Mode().Perm(), err)
	}
}

// TestSupervisorRemovesStaleDirs: the private directory of a host killed
// with SIGKILL (a real process) is removed when the next supervisor starts;
// that of a live host stays, as do directories without an owner record.
func TestSupervisorRemovesStaleDirs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	parent := testhelp.ShortDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	startHost := func() (*exec.Cmd, string) {
		t.Helper()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), privateDirEnv+"="+parent)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("the host made no directory: %v", err)
		}
		return cmd, strings.TrimSpace(line)
	}
	killed, killedDir := startHost()
	_, liveDir := startHost()
	if err := killed.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed.Wait() // reaped: its pid is free
	// A directory of the same name pattern without an owner record (not
	// ours to judge) and a file.
	unknown := filepath.Join(parent, "inferbid-sidecar-unknown")
	if err := os.Mkdir(unknown, 0o700); err != nil {
		t.Fatal(err)
	}
	keep := []string{liveDir, unknown}
	if os.Geteuid() == 0 {
		// Another user's directory, though its owner is gone, is not ours
		// to remove.
		other, err := sidecar.MakePrivateDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, "owner"), []byte(killedOwner(t, killedDir)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, other)
	}
	for _, d := range []string{killedDir, liveDir} {
		if !strings.HasPrefix(d, filepath.Join(parent, "inferbid-sidecar-")) {
			t.Fatalf("host directory %q, want one in %s", d, parent)
		}
		if _, err := os.Stat(filepath.Join(d, "owner")); err != nil {
			t.Fatal(err)
		}
	}

	var log testhelp.SyncBuffer
	sup := startChildSupervisor(t, &log, sidecar.SupervisorOptions{TempDir: parent})
	if _, err := os.Stat(killedDir); !os.IsNotExist(err) {
		t.Errorf("the killed host's directory %s is still there: %v\n%s", killedDir, err, log.String())
	}
	for _, d := range keep {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	if own := filepath.Dir(sup.SocketPath()); filepath.Dir(own) != parent {
		t.Errorf("the supervisor's directory %s is not in %s", own, parent)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sup.WaitHealthy(ctx); err != nil {
		t.Error(err)
	}
}

func killedOwner(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "owner"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
