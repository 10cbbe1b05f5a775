;; bad_noabi: lacks the rift_abi_v1 marker.
(module
  (memory (export "memory") 1)
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
