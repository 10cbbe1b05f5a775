package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	pb "github.com/riftgate/riftgate/internal/grpctest/greeterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkGRPCUnary calls a unary static stub of a riftgate grpc
// imposter, and a raw grpc-go server (internal/grpctest/greeterd, in a
// process of its own as riftgate is) answering the same message: the
// limit. Both over one loopback connection, with calls in parallel.
//
//	go test ./gateway/e2e -run XXX -bench GRPCUnary -cpu 2
func BenchmarkGRPCUnary(b *testing.B) {
	rg := gatewaytest.Start(b)
	port := rg.PostImposter(greeterBenchImposter(b, gatewaytest.FreePort(b)))
	raw, rawPID := startGreeterd(b)
	for _, tc := range []struct {
		name, addr string
		pid        int
	}{
		{"riftgate", "127.0.0.1:" + itoa(port), pidOf(b, rg)},
		{"raw-grpc-go", raw, rawPID},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cc, err := grpc.NewClient(tc.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			c := pb.NewGreeterClient(cc)
			req := &pb.HelloRequest{Name: "bench"}
			if _, err := c.SayHello(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(16)
			cpu0 := cpuTime(b, tc.pid)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.SayHello(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b, tc.pid)-cpu0)/float64(b.N), "server-cpu-ns/op")
		})
	}
}

// startGreeterd builds and starts greeterd, stopped when the benchmark
// ends, and returns its address.
func startGreeterd(b *testing.B) (string, int) {
	bin := filepath.Join(b.TempDir(), "greeterd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/riftgate/riftgate/internal/grpctest/greeterd").CombinedOutput(); err != nil {
		b.Fatalf("build greeterd: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(addr), cmd.Process.Pid
}

// cpuTime is the CPU a process has used, user and system, in nanoseconds
// (at the kernel's 100 ticks a second).
func cpuTime(b *testing.B, pid int) int64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's closing parenthesis; utime and
	// stime are the 12th and 13th of them.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return (u + s) * int64(10*time.Millisecond)
}

// greeterBenchImposter answers SayHello what the raw server answers
// ("hello bench", id 1, HAPPY).
func greeterBenchImposter(b *testing.B, port int) string {
	root, err := gatewaytest.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	return `{"protocol":"grpc","port":` + itoa(port) + `,"services":{"riftgate.test.Greeter":{"file":"greeter.proto"}},
		"options":{"protobufjs":{"includeDirs":["` + root + `/internal/grpctest/greeterpb"]}},
		"stubs":[{"responses":[{"is":{"value":{"id":1,"message":"hello bench","mood":"HAPPY"}}}]}]}`
}

func itoa(n int) string {
	const digits = "0123456789"
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{digits[n%10]}, b...)
	}
	return string(b)
}
