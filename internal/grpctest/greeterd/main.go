// Command greeterd serves grpctest's Greeter on a loopback port and prints
// the address: the raw grpc-go server benchmarks hold riftgate against,
// in a process of its own as riftgate is.
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/riftgate/riftgate/internal/grpctest"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop := grpctest.Serve(ln)
	fmt.Println(ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	stop()
}
