;; bad_start: a command module (exports _start).
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "_start"))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
