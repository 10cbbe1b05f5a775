;; bad_reserved: exports the name the host gives its stop flag.
(module
  (memory (export "memory") 1)
  (global (export "riftgate.stop") (mut i32) (i32.const 0))
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
