;; recurse: recurses until the stack overflows.
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func $handle (export "handle") (param i32) (result i32)
    (i32.add (call $handle (i32.add (local.get 0) (i32.const 1))) (i32.const 1))))
