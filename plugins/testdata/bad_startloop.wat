;; bad_startloop: its WebAssembly start function never returns; only the
;; deadline stops it, while the module is being registered.
(module
  (memory (export "memory") 1)
  (func $start (loop $forever (br $forever)))
  (start $start)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
