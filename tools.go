//go:build tools

// Package riftgate pins dependencies that packages will import as they land.
package main
import (
 _ "github.com/tetratelabs/wazero"
 _ "github.com/valyala/fasthttp"
 _ "go.etcd.io/raft/v3"
 _ "go.etcd.io/bbolt"
 _ "github.com/cespare/xxhash/v2"
 _ "github.com/fxamacker/cbor/v2"
 _ "github.com/dop251/goja"
 _ "github.com/anishathalye/porcupine"
 _ "pgregory.net/rapid"
 _ "go.uber.org/goleak"
 _ "github.com/antchfx/xmlquery"
 _ "github.com/antchfx/xpath"
 _ "github.com/theory/jsonpath"
 _ "github.com/HdrHistogram/hdrhistogram-go"
)
func main(){}
