package testhelp

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RedisCluster is a Redis Cluster of real redis-server processes on
// 127.0.0.1, each a master, started for one test (Debian's redis-server;
// `make test` installs it: deps-redis).
type RedisCluster struct {
	Addrs []string
	cmds  []*exec.Cmd
	args  [][]string
	outs  []*SyncBuffer
	t     testing.TB
}

// URL is the cluster as a varstore URL (redis-cluster://a,b,c).
func (c *RedisCluster) URL() string { return "redis-cluster://" + strings.Join(c.Addrs, ",") }

// Kill ends master i (SIGKILL), as a crash would.
func (c *RedisCluster) Kill(i int) {
	_ = c.cmds[i].Process.Kill()
	_ = c.cmds[i].Wait()
}

// Pause stops master i (SIGSTOP) without closing anything: its
// connections stay open and it answers nothing, as a hung node or one
// behind a network partition. Resume continues it (Kill works either way).
func (c *RedisCluster) Pause(i int) { _ = c.cmds[i].Process.Signal(syscall.SIGSTOP) }

// Resume continues master i after Pause.
func (c *RedisCluster) Resume(i int) { _ = c.cmds[i].Process.Signal(syscall.SIGCONT) }

// Restart starts master i again (after Kill) on its port, with its
// directory: it rejoins the cluster as the same node and reloads its data
// from its append-only file.
func (c *RedisCluster) Restart(i int) {
	c.t.Helper()
	cmd := exec.Command("redis-server", c.args[i]...)
	cmd.Stdout, cmd.Stderr = c.outs[i], c.outs[i]
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c.cmds[i] = cmd
	waitTCP(c.t, c.Addrs[i], c.outs[i])
}

// StartRedisCluster starts n (>= 3) masters in temp dirs with cluster mode
// on, joins them with `redis-cli --cluster create`, and waits until the
// cluster answers with cluster_state:ok. It skips the test when
// redis-server is missing and never runs under -short.
func StartRedisCluster(t testing.TB, n int) *RedisCluster {
	t.Helper()
	return startRedisCluster(t, n, 0)
}

// StartRedisClusterWithReplicas is StartRedisCluster with one replica per
// master (2n processes): a killed master's replica takes over its slots
// after the node timeout (2 s). IsMaster tells which nodes are masters.
func StartRedisClusterWithReplicas(t testing.TB, n int) *RedisCluster {
	t.Helper()
	return startRedisCluster(t, n, 1)
}

// IsMaster reports whether node i is a master now.
func (c *RedisCluster) IsMaster(i int) bool {
	host, port, _ := net.SplitHostPort(c.Addrs[i])
	out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "role").Output()
	return strings.HasPrefix(string(out), "master")
}

func startRedisCluster(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	n := masters * (1 + replicas)
	if testing.Short() {
		t.Skip("starts a Redis Cluster (not under -short)")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server (make test installs it: scripts/apt-install.sh redis-server)")
	}
	c := &RedisCluster{t: t}
	for i := 0; i < n; i++ {
		// The cluster bus gets a port of its own (by default it is port +
		// 10000, which may be taken or past 65535).
		port, bus := freeTCPPort(t), freeTCPPort(t)
		dir := t.TempDir()
		// The append-only file (written before each reply, fsynced every
		// second) lets a killed node come back with its data (Restart).
		args := []string{"--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
			"--dir", dir, "--save", "", "--appendonly", "yes", "--protected-mode", "no", "--repl-diskless-sync-delay", "0"}
		cmd := exec.Command("redis-server", args...)
		out := &SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		waitTCP(t, addr, out)
		c.Addrs = append(c.Addrs, addr)
		c.cmds = append(c.cmds, cmd)
		c.args = append(c.args, args)
		c.outs = append(c.outs, out)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, a := range c.Addrs {
		host, port, _ := net.SplitHostPort(a)
		for {
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis cluster node %s not ok after 60 s:\n%s", a, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A replica that never synced with its master would not take over
	// (cluster-replica-validity-factor): wait until every link is up.
	for _, a := range c.Addrs {
		host, port, _ := net.SplitHostPort(a)
		for {
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "info", "replication").Output()
			if strings.Contains(string(out), "role:master") || strings.Contains(string(out), "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis replica %s not in sync after 60 s:\n%s", a, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c
}

func freeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitTCP(t testing.TB, addr string, out fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not listen within 30 s: %v\n%s", addr, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
