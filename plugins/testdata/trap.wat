;; trap: executes unreachable.
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    unreachable))
