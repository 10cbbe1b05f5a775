;; bad_import: imports from a module the host does not provide.
(module
  (import "env" "abort" (func (param i32)))
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
