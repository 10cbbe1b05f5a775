;; bad_marker: rift_abi_v1 has the wrong type.
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1") (param i32))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
