package sidecar_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// The sidecar is killed while it loads models being registered for the
// first time (a first load): the registrations do not fail, the replay
// after the restart brings them in, and they return once the models
// serve. Readiness (WaitHealthy) is not ready until every one of them is
// back, and no call for them answers MODEL_NOT_FOUND once it is. A replay
// that outlasts ReplayDeadline is reported (OnSlowReplay), and every
// replay's duration (OnReplay).
func TestSupervisorKillDuringFirstLoad(t *testing.T) {
	killDuringFirstLoad(t, func(ctx context.Context, sup *sidecar.Supervisor, m replayModel) error {
		return sup.RegisterModel(ctx, m.path, m.files, "")
	})
}

// TestSupervisorKillDuringFirstLoadFromDisk is TestSupervisorKillDuringFirstLoad
// for models registered from local files (RegisterModelFiles: the bucket
// watcher's downloads), which must be adopted by the replay alike.
func TestSupervisorKillDuringFirstLoadFromDisk(t *testing.T) {
	killDuringFirstLoad(t, func(ctx context.Context, sup *sidecar.Supervisor, m replayModel) error {
		dir := t.TempDir()
		disk := runtimes.DiskFiles{}
		for name, b := range m.files {
			p := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				return err
			}
			disk[name] = p
		}
		return sup.RegisterModelFiles(ctx, m.path, disk, "", nil)
	})
}

// TestSupervisorKillDuringFirstLoadDownloaded is TestSupervisorKillDuringFirstLoad
// for verified downloads (RegisterDownloadedFiles: the files are hard-linked
// into the replay store, and the sidecar links them in turn), which must be
// adopted by the replay alike.
func TestSupervisorKillDuringFirstLoadDownloaded(t *testing.T) {
	killDuringFirstLoad(t, func(ctx context.Context, sup *sidecar.Supervisor, m replayModel) error {
		dir := t.TempDir()
		disk := runtimes.DiskFiles{}
		sums := map[string][sha256.Size]byte{}
		for name, b := range m.files {
			p := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				return err
			}
			disk[name], sums[name] = p, sha256.Sum256(b)
		}
		err := sup.RegisterDownloadedFiles(ctx, m.path, disk, sums, "", nil)
		os.RemoveAll(dir) // as the watcher does: the store keeps its links
		return err
	})
}

func killDuringFirstLoad(t *testing.T, register func(context.Context, *sidecar.Supervisor, replayModel) error) {
	if testing.Short() {
		t.Skip("starts and kills sidecar processes")
	}
	// The killed sidecar's registration directories (links to the
	// replay store's files) must not be left in $TMPDIR.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var log testhelp.SyncBuffer
	var slow, replays atomic.Int64
	var replayedModels atomic.Int64
	sup := startChildSupervisor(t, &log, sidecar.SupervisorOptions{
		ReplayDeadline: 300 * time.Millisecond,
		OnSlowReplay:   func() { slow.Add(1) },
		OnReplay: func(_ time.Duration, models int) {
			replays.Add(1)
			replayedModels.Store(int64(models))
		},
	})
	models := []replayModel{
		{"m1/", paddedAffine("2 1 0s 1 1s", 256<<10), 2, 1},
		{"m2/", paddedAffine("3 -1 0s 1 1s", 256<<10), 3, -1},
		{"m3/", paddedAffine("1 0 0s 1 1s", 256<<10), 1, 0},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, len(models))
	for _, m := range models {
		go func() { errs <- register(ctx, sup, m) }()
	}
	// Kill once the sidecar is loading all three.
	c := sup.Client()
	for {
		infos, err := c.Models(ctx, "")
		if err == nil && len(infos) == len(models) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the models never showed as loading: %v %v", infos, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	pid := sup.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Readiness until every registration returned: never ready while one
	// is still out.
	var readyEarly atomic.Int64
	pollDone := make(chan struct{})
	var left atomic.Int64
	left.Store(int64(len(models)))
	go func() {
		defer close(pollDone)
		for left.Load() > 0 {
			hctx, hcancel := context.WithTimeout(ctx, 50*time.Millisecond)
			err := sup.WaitHealthy(hctx)
			hcancel()
			if err == nil && left.Load() > 0 {
				// Ready with a registration still waiting: is its model
				// served? (It may have just returned.)
				for _, m := range models {
					if _, perr := predictAffine(ctx, c, m.path, []float32{1, 2, 3}); perr != nil {
						readyEarly.Add(1)
						t.Logf("ready, but %s: %v", m.path, perr)
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for range models {
		if err := <-errs; err != nil {
			t.Errorf("registration across the kill: %v", err)
		}
		left.Add(-1)
	}
	<-pollDone
	if sup.Pid() == pid {
		t.Fatalf("same pid %d after the kill", pid)
	}
	if left, err := filepath.Glob(filepath.Join(tmp, "inferbid-register-*")); err != nil || len(left) > 0 {
		t.Errorf("the killed sidecar's registration directories are left in $TMPDIR: %v (%v)", left, err)
	}
	// Nor in the supervisor's: the new sidecar's registrations ended.
	if left, err := filepath.Glob(filepath.Join(sup.SidecarTempDir(), "inferbid-register-*")); err != nil || len(left) > 0 {
		t.Errorf("the killed sidecar's registration directories are left in its temp dir: %v (%v)", left, err)
	}
	if err := sup.WaitHealthy(ctx); err != nil {
		t.Fatalf("not healthy after the registrations returned: %v", err)
	}
	x := []float32{1, -2, 0.5}
	for _, m := range models {
		y, err := predictAffine(ctx, c, m.path, x)
		if err != nil || !isAffine(x, y, m.a, m.b) {
			t.Errorf("%s after the replay: %v, %v", m.path, y, err)
		}
	}
	if n := readyEarly.Load(); n > 0 {
		t.Errorf("%d calls failed while readiness said ready", n)
	}
	if replays.Load() != 1 || replayedModels.Load() != int64(len(models)) {
		t.Errorf("OnReplay: %d replays, the last of %d models; want 1 of %d", replays.Load(), replayedModels.Load(), len(models))
	}
	if slow.Load() != 1 {
		t.Errorf("OnSlowReplay called %d times for a replay of 1s models against a 300ms deadline; want 1", slow.Load())
	}
	if !strings.Contains(log.String(), "the replay after its restart registers the model") {
		t.Errorf("no adoption in the log:\n%s", log.String())
	}
	// The adopted models replay again after the next kill, as any other.
	onAgain := replays.Load()
	if err := syscall.Kill(sup.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for replays.Load() == onAgain {
		if ctx.Err() != nil {
			t.Fatal("no second replay")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if replayedModels.Load() != int64(len(models)) {
		t.Errorf("second replay had %d models, want %d", replayedModels.Load(), len(models))
	}
}
