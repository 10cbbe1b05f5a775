// Package rift is the Go guest kit for riftgate plugins (ABI v1, see
// sdk/ABI.md): it decodes the request envelope, reads the stub's config,
// reads and writes the request's flow, and writes the response.
//
// A plugin is a wasip1 reactor. Register handlers from init and build with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// The kit exports rift_abi_v1 and the entry points handle, matches and
// decorate; an entry point without a registered handler fails its call.
//
// The envelope codec is hand-written and uses no reflection: a reflection
// codec compiled into a guest made each call about 25 times slower here.
// The codec builds on every GOOS so that its tests and fuzz targets run
// natively; the host bindings build only for wasip1.
package rift
