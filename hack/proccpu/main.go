// Command proccpu runs a command and says where the machine's CPU went while it ran: every
// process's user and system time, read from /proc/<pid>/stat every interval and summed by the
// name of its executable. A process that lives less than an interval may be missed (a compiler's
// run on one package), so the table speaks for long-lived processes: API servers, controllers,
// test binaries. The command's own total, every descendant it waited for included, is exact: it
// is wait4's, as time(1) prints it.
//
//	go run ./hack/proccpu -every 5s -- make test
package main

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is sysconf(_SC_CLK_TCK), by which proc(5) says utime and stime are counted: Linux's
// USER_HZ, 100 (`getconf CLK_TCK` on this machine).
const clockTicks = 100

type key struct{ pid, start string }

func main() {
	every := flag.Duration("every", 5*time.Second, "how often /proc is read")
	top := flag.Int("top", 20, "how many executables the table lists")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: proccpu [-every 5s] [-top 20] -- command [args...]")
		os.Exit(2)
	}
	before := sample()
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	last := map[key]sampled{}
	var err error
	for running := true; running; {
		select {
		case err = <-done:
			running = false
		case <-time.After(*every):
		}
		for k, s := range sample() {
			last[k] = s
		}
	}
	byName := map[string]float64{}
	total := 0.0
	for k, s := range last {
		cpu := s.cpu - before[k].cpu // a process that ran before the command counts from then
		byName[s.name] += cpu
		total += cpu
	}
	names := slices.SortedFunc(maps.Keys(byName), func(a, b string) int { return cmp.Compare(byName[b], byName[a]) })
	wall := time.Since(start).Seconds()
	// wait4's rusage counts the command and every descendant reaped (as time(1) does): the
	// short-lived processes the samples miss included.
	if st := cmd.ProcessState; st != nil {
		fmt.Printf("proccpu: the command and the descendants it waited for: %.0f s of CPU in %.0f s\n",
			(st.UserTime() + st.SystemTime()).Seconds(), wall)
	}
	fmt.Printf("proccpu: sampled every %s, %.0f s of CPU (%.0f%% of %d cores' time), by executable:\n", *every, total, 100*total/wall/float64(runtime.NumCPU()), runtime.NumCPU())
	for _, n := range names[:min(*top, len(names))] {
		if byName[n] < 0.05 {
			break
		}
		fmt.Printf("proccpu: %9.1f s  %4.1f%%  %s\n", byName[n], 100*byName[n]/total, n)
	}
	if err != nil {
		os.Exit(1)
	}
}

type sampled struct {
	name string
	cpu  float64
}

// sample reads every process's name and CPU seconds so far.
func sample() map[key]sampled {
	out := map[key]sampled{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// proc(5): "pid (comm) state ..."; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 20 {
			continue
		}
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		name := string(stat[strings.IndexByte(string(stat), '(')+1 : i])
		if argv, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && len(argv) > 0 {
			if exe, _, _ := strings.Cut(string(argv), "\x00"); exe != "" {
				name = filepath.Base(exe)
			}
		}
		out[key{e.Name(), f[19]}] = sampled{name: name, cpu: (utime + stime) / clockTicks}
	}
	return out
}
