;; wasi: prints to stdout through WASI and checks that the environment is
;; empty; returns the number of environment variables (0 expected).
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "hello from wasi\n")
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    ;; iovec at 0: {ptr 64, len 16}
    (i32.store (i32.const 0) (i32.const 64))
    (i32.store (i32.const 4) (i32.const 16))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (drop (call $environ_sizes_get (i32.const 16) (i32.const 20)))
    (i32.load (i32.const 16))))
