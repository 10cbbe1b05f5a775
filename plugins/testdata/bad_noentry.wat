;; bad_noentry: no export has type (i32) -> i32.
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "handle") (result i32) (i32.const 0)))
