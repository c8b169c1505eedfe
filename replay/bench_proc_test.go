package replay

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// raiseFileLimit sets the soft limit on open files to the hard limit.
func raiseFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}

// peakRSS reads VmHWM (peak resident set size, kB) from a /proc status
// file.
func peakRSS(statusFile string) int64 {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// startServer starts srv's process on the session at path and returns it
// with its URL's host:port, its stdin (closing it stops the server) and
// its stdout.
func startServer(b *testing.B, srv latenessServer, path string) (*exec.Cmd, string, io.WriteCloser, *bufio.Scanner) {
	cmd := exec.Command(srv.bin, "-test.run=^"+srv.test+"$", "-test.v")
	cmd.Env = append(os.Environ(), srv.env+"="+path)
	if p := os.Getenv("WTRACE_LATENESS_CPUPROFILE"); p != "" {
		cmd.Env = append(cmd.Env, "WTRACE_LATENESS_CPUPROFILE="+p+"."+srv.name)
	}
	if p := os.Getenv("WTRACE_LATENESS_HEAPPROFILE"); p != "" {
		cmd.Env = append(cmd.Env, "WTRACE_LATENESS_HEAPPROFILE="+p+"."+srv.name)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	var url string
	for out.Scan() {
		if u, ok := strings.CutPrefix(out.Text(), "URL "); ok {
			url = u
			break
		}
	}
	if url == "" {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatalf("the %s server process did not start", srv.name)
	}
	return cmd, strings.TrimPrefix(url, "http://"), stdin, out
}

// stopServer stops a server process and returns its peak RSS (kB), CPU
// time and the LIVE reports it printed (see profileOnSignal).
func stopServer(cmd *exec.Cmd, stdin io.WriteCloser, out *bufio.Scanner) (rss int64, cpu time.Duration, live []int64) {
	stdin.Close()
	for out.Scan() {
		if v, ok := strings.CutPrefix(out.Text(), "VmHWM "); ok {
			rss, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(out.Text(), "LIVE "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			live = append(live, n)
		}
	}
	cmd.Wait()
	if ps := cmd.ProcessState; ps != nil {
		cpu = ps.UserTime() + ps.SystemTime()
	}
	return rss, cpu, live
}

// cpuTime reads the user and system time process pid has used so far
// (/proc/pid/stat, in clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// syscalls reads how many write and read system calls (write, writev,
// sendmsg…; read, recvmsg…) process pid made, and the bytes it wrote, from
// /proc/pid/io.
func syscalls(pid int) (w, r, wbytes int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			wbytes, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			w, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(l, "syscr: "); ok {
			r, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return w, r, wbytes
}

// residentKiB reads VmRSS (kB) of process pid.
func residentKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}
