;; loop: never returns; only the deadline stops it.
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    (loop $forever (br $forever))
    (i32.const 0)))
