package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment variables shared with scripts/test-servers.sh.
const (
	EnvS3Endpoint     = "INFERBID_S3_ENDPOINT"   // http://127.0.0.1:PORT
	EnvS3AccessKey    = "INFERBID_S3_ACCESS_KEY" // also exported as AWS_ACCESS_KEY_ID
	EnvS3SecretKey    = "INFERBID_S3_SECRET_KEY" // also exported as AWS_SECRET_ACCESS_KEY
	EnvGCSHost        = "STORAGE_EMULATOR_HOST"  // 127.0.0.1:PORT, read by gcsblob
	EnvRequireServers = "INFERBID_REQUIRE_SERVERS"
)

// Servers are running test servers. An empty endpoint means that server is
// not available; SkipReason says why.
type Servers struct {
	S3Endpoint, AccessKey, SecretKey string
	GCSHost                          string
	S3SkipReason, GCSSkipReason      string

	procs []*proc
	dir   string
}

// proc is a started server; done closes when it exits.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Required reports whether missing servers must fail tests instead of
// skipping them (make test sets INFERBID_REQUIRE_SERVERS=1).
func Required() bool { return os.Getenv(EnvRequireServers) == "1" }

// Need skips the test (or, when Required, fails it) because the named
// server is unavailable for reason.
func Need(t testing.TB, name, reason string) {
	t.Helper()
	msg := fmt.Sprintf("%s test server unavailable: %s", name, reason)
	if Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Start uses servers named by the environment, or starts the installed
// binaries in a private temp dir. It also sets the process environment the
// gocloud drivers read (AWS_* credentials and region,
// AWS_EC2_METADATA_DISABLED, STORAGE_EMULATOR_HOST). Call Stop at the end.
func Start() (*Servers, error) {
	s := &Servers{}
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if ep := os.Getenv(EnvS3Endpoint); ep != "" {
		s.S3Endpoint, s.AccessKey, s.SecretKey = ep, os.Getenv(EnvS3AccessKey), os.Getenv(EnvS3SecretKey)
	}
	if h := os.Getenv(EnvGCSHost); h != "" {
		s.GCSHost = h
	}
	var err error
	if s.S3Endpoint == "" || s.GCSHost == "" {
		if s.dir, err = os.MkdirTemp("", "inferbid-testservers-*"); err != nil {
			return nil, err
		}
	}
	if s.S3Endpoint == "" {
		if err := s.startVersity(); err != nil {
			s.S3SkipReason = err.Error()
		}
	}
	if s.GCSHost == "" {
		if err := s.startFakeGCS(); err != nil {
			s.GCSSkipReason = err.Error()
		}
	}
	if s.S3Endpoint != "" {
		os.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
		os.Setenv("AWS_REGION", "us-east-1")
		os.Unsetenv("AWS_PROFILE")
	}
	if s.GCSHost != "" {
		os.Setenv(EnvGCSHost, s.GCSHost)
	}
	return s, nil
}

// Stop stops the servers Start started (by PID) and removes their files.
func (s *Servers) Stop() {
	for _, p := range s.procs {
		stopProcess(p)
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

func stopProcess(p *proc) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// FindBinary looks for name on PATH and in GOPATH/bin (where go install
// puts it).
func FindBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed (run scripts/test-servers.sh install)", name)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Servers) start(name string, env []string, args ...string) (*proc, error) {
	bin, err := FindBinary(name)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(s.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	return p, nil
}

func (s *Servers) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, name+".log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// waitHTTP waits until url answers any HTTP status.
func waitHTTP(p *proc, u string) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.done:
			return errors.New("the server exited")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("the server did not answer within 30s")
}

func (s *Servers) startVersity() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	root := filepath.Join(s.dir, "s3")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	access, secret := "inferbid", "inferbid-test-secret"
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd, err := s.start("versitygw", []string{"ROOT_ACCESS_KEY=" + access, "ROOT_SECRET_KEY=" + secret},
		"--port", addr, "posix", root)
	if err != nil {
		return err
	}
	if err := waitHTTP(cmd, "http://"+addr+"/"); err != nil {
		return fmt.Errorf("versitygw: %v: %s", err, s.logTail("versitygw"))
	}
	s.S3Endpoint, s.AccessKey, s.SecretKey = "http://"+addr, access, secret
	return nil
}

func (s *Servers) startFakeGCS() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd, err := s.start("fake-gcs-server", nil,
		"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
		"-public-host", addr, "-backend", "memory", "-log-level", "warn")
	if err != nil {
		return err
	}
	if err := waitHTTP(cmd, "http://"+addr+"/storage/v1/b"); err != nil {
		return fmt.Errorf("fake-gcs-server: %v: %s", err, s.logTail("fake-gcs-server"))
	}
	s.GCSHost = addr
	return nil
}

// S3BucketURL creates bucket on the S3 server and returns its gocloud URL.
func (s *Servers) S3BucketURL(ctx context.Context, bucket string) (string, error) {
	if s.S3Endpoint == "" {
		return "", errors.New("no S3 server: " + s.S3SkipReason)
	}
	if err := createS3Bucket(ctx, s.S3Endpoint, s.AccessKey, s.SecretKey, bucket); err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("endpoint", s.S3Endpoint)
	q.Set("use_path_style", "true")
	q.Set("region", "us-east-1")
	q.Set("disable_https", "true")
	return "s3://" + bucket + "?" + q.Encode(), nil
}

// GCSBucketURL creates bucket on the GCS emulator and returns its URL.
func (s *Servers) GCSBucketURL(ctx context.Context, bucket string) (string, error) {
	if s.GCSHost == "" {
		return "", errors.New("no GCS server: " + s.GCSSkipReason)
	}
	body := []byte(`{"name":"` + bucket + `"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.GCSHost+"/storage/v1/b?project=inferbid", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("create GCS bucket %q: %w", bucket, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("create GCS bucket %q: %s", bucket, resp.Status)
	}
	return "gs://" + bucket, nil
}
