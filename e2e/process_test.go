//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A proc is one process the suite started. Its output goes to a log file that is kept, and
// printed, when anything fails. It can be killed and started again as it was (restart).
//
// A proc that plays a part the kubelet runs in a real cluster (asKubelet) is also started again
// when it exits on its own, as the kubelet starts a crashed container again: the control
// planes' components, Crossplane, the providers, Flux. On two shared cores a kube-apiserver
// restarted by a fault test exited on its own, starved ("PostStartHook
// start-service-ip-repair-controllers failed", 2026-12-05), and Crossplane with it; on a real
// node the kubelet would have started both again. The function is not: its crash is a defect
// the suite must see.
type proc struct {
	name string
	log  string
	env  []string
	bin  string
	args []string

	mu   sync.Mutex
	life *life // the current run
	// held is set while the test has the process stopped (kill, stop): it is not started again
	// until the test does (restart).
	held bool
	// kubelet says the process is started again when it exits on its own (asKubelet), after
	// the kubelet's crash-loop back-off; crashes counts those exits since the back-off was last
	// reset, lastCrash is the latest.
	kubelet   bool
	crashes   int
	lastCrash time.Time
}

// A life is one run of a proc's process.
type life struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set once done is closed
	// pid is the process' ID, set before the life is the proc's current one.
	pid int
}

// startProc starts bin with args and extra environment, its stdout and stderr in
// logDir/<name>.log. Pdeathsig makes the kernel kill it if the test binary dies without
// cleaning up (go test's timeout panics skip deferred functions).
func startProc(logDir, name string, env []string, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(logDir, name+".log"), env: env, bin: bin, args: args}
	return p, p.launch()
}

// asKubelet has p started again whenever it exits on its own, as the kubelet does with a
// container of restartPolicy Always (the default: k8s.io/api v0.35.4 core/v1 types.go,
// PodSpec.RestartPolicy), after its crash-loop back-off: 10 s, doubled at each crash up to
// 300 s, and back to 10 s once 600 s passed since the last crash (kubernetes v1.35.4
// pkg/kubelet/kubelet.go: initialCrashLoopBackOff, MaxCrashLoopBackOff and the back-off's
// HasExpiredFunc; the doubling is client-go v0.35.4 util/flowcontrol/backoff.go, Next, whose
// jitter the kubelet leaves at 0). It returns p.
func (p *proc) asKubelet() *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kubelet = true
	return p
}

// current is the proc's current run.
func (p *proc) current() *life {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.life
}

// pid is the ID of the proc's current process.
func (p *proc) pid() int { return p.current().pid }

// launch starts the proc's process, appending to its log.
func (p *proc) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.launchLocked()
}

// launchLocked is launch, p.mu held.
func (p *proc) launchLocked() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(f, "+ %s %s\n", p.bin, strings.Join(p.args, " "))
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("cannot start %s: %w", p.name, err)
	}
	r := &life{cmd: cmd, done: make(chan struct{}), pid: cmd.Process.Pid}
	go func() {
		r.err = cmd.Wait()
		f.Close()
		close(r.done)
		p.crashed(r)
	}()
	p.life = r
	return nil
}

// crashed starts a kubelet-run proc again once r, its run, ended on its own, after the
// kubelet's back-off; unless meanwhile the test stopped it or started it again itself.
func (p *proc) crashed(r *life) {
	p.mu.Lock()
	if !p.kubelet || p.held || p.life != r {
		p.mu.Unlock()
		return
	}
	if time.Since(p.lastCrash) > 600*time.Second {
		p.crashes = 0
	}
	backoff := min(10*time.Second<<min(p.crashes, 5), 300*time.Second)
	p.crashes++
	p.lastCrash = time.Now()
	p.mu.Unlock()
	fmt.Printf("e2e: %s exited on its own (%v); started again %s later, as the kubelet would\n", p.name, r.err, backoff)
	time.Sleep(backoff)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held || p.life != r {
		return
	}
	if err := p.launchLocked(); err != nil {
		fmt.Printf("e2e: %s: %v\n", p.name, err)
	}
}

// hold marks p stopped by the test, and returns its current run.
func (p *proc) hold() *life {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
	return p.life
}

// kill ends the process at once, as a crash or the OOM killer would (SIGKILL). It stays
// stopped until restart.
func (p *proc) kill() {
	r := p.hold()
	if done, _ := r.exited(); !done {
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// restart starts the process again as it was first started, once it has ended.
func (p *proc) restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = false
	if done, _ := p.life.exited(); !done {
		return fmt.Errorf("%s is still running", p.name)
	}
	return p.launchLocked()
}

// exited reports whether the proc's current process has already ended, and how.
func (p *proc) exited() (bool, error) { return p.current().exited() }

// gone reports whether the proc's process has ended and will not be started again by the
// kubelet's part (asKubelet): a wait for it to serve can give up.
func (p *proc) gone() (bool, error) {
	done, err := p.exited()
	p.mu.Lock()
	defer p.mu.Unlock()
	return done && (!p.kubelet || p.held), err
}

func (r *life) exited() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

// stop ends the process by its PID: TERM, up to grace to exit, then KILL. It stays stopped
// until restart.
func (p *proc) stop(grace time.Duration) {
	r := p.hold()
	if done, _ := r.exited(); done {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
		return
	case <-time.After(grace):
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// runProc runs bin to completion, its output appended to logDir/<name>.log.
func runProc(logDir, name string, env []string, timeout time.Duration, bin string, args ...string) error {
	p, err := startProc(logDir, name, env, bin, args...)
	if err != nil {
		return err
	}
	r := p.current()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		p.stop(5 * time.Second)
		return fmt.Errorf("%s did not finish within %s", name, timeout)
	}
}

// freePort returns a loopback port no one listens on, below the kernel's ephemeral range.
//
// A port the kernel hands to a listener on port 0 is in net.ipv4.ip_local_port_range, the range
// it also picks the local port of every outgoing connection from (Documentation/networking/
// ip-sysctl.rst, ip_local_port_range). Between this check and the process that binds it, any
// connection of the run (hundreds, between the clusters' components) could take such a port: a
// source-controller then ran without its artifact server ("bind: address already in use") and
// its source never got Ready. Below that range only a listener can take the port, and the
// ports this process handed out are not handed out twice.
func freePort() (int, error) {
	low, first := ephemeralLow(), lowestPort
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := first + rand.IntN(low-first)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		handedOut[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d", first, low)
}

// lowestPort is the lowest port freePort hands out, above the well-known and registered ports
// commonly listened on.
const lowestPort = 10000

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot be read,
// Linux's default).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lowestPort+1000 {
				low = n
			}
		}
	}
	return low
}

// freePorts returns n free loopback ports (freePort).
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// waitHealthy waits until url answers 200 OK, failing at once if p exited.
func waitHealthy(ctx context.Context, timeout time.Duration, what string, p *proc, url string) error {
	return waitFor(ctx, timeout, what, func() (bool, error) {
		if done, err := p.gone(); done {
			return false, fmt.Errorf("%s exited: %v", p.name, err)
		}
		rsp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		rsp.Body.Close()
		return rsp.StatusCode == http.StatusOK, nil
	})
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 1<<20 {
		_, _ = f.Seek(-1<<20, io.SeekEnd)
	}
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// TestKubeletPart holds proc's part of the kubelet: a process that exits on its own is started
// again after the first back-off (10 s), not before; one the test kills stays down until the
// test starts it again; one not run by the kubelet's part (the function's case) is never
// started again.
func TestKubeletPart(t *testing.T) {
	timed(t)
	dir := t.TempDir()
	launches := func(p *proc) int {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "+ /bin/sh")
	}
	crashing, err := startProc(dir, "crashing", nil, "/bin/sh", "-c", "sleep 1; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	crashing.asKubelet()
	t.Cleanup(func() { crashing.stop(time.Second) })
	// It exits after a second; the kubelet's part starts it again 10 s later.
	time.Sleep(8 * time.Second)
	if n := launches(crashing); n != 1 {
		t.Errorf("the crashed process was started %d times within 8 s, want once: before the 10 s back-off", n)
	}
	if err := waitFor(t.Context(), 20*time.Second, "the crashed process started again", func() (bool, error) {
		return launches(crashing) == 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	if done, _ := crashing.gone(); done {
		t.Error("a kubelet-run process that crashed counts as gone")
	}

	// A process the test killed, and one not run by the kubelet's part (the function's case),
	// which exits: both stay down past the first back-off.
	killed, err := startProc(dir, "killed", nil, "/bin/sh", "-c", "sleep 600")
	if err != nil {
		t.Fatal(err)
	}
	killed.asKubelet().kill()
	once, err := startProc(dir, "once", nil, "/bin/sh", "-c", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(12 * time.Second)
	for _, p := range []*proc{killed, once} {
		if n := launches(p); n != 1 {
			t.Errorf("%s was started %d times, want once", p.name, n)
		}
		if done, _ := p.gone(); !done {
			t.Errorf("%s, ended, does not count as gone", p.name)
		}
	}
	if err := killed.restart(); err != nil {
		t.Fatal(err)
	}
	if done, _ := killed.exited(); done || launches(killed) != 2 {
		t.Errorf("restart did not start the killed process again (%d launches)", launches(killed))
	}
	killed.stop(time.Second)
}
