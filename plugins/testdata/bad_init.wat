;; bad_init: its _initialize traps, so no instance can start.
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "_initialize") unreachable)
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
