;; bad_nomemory: its memory is not exported.
(module
  (memory 1)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
