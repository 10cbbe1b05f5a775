;; bad_unknown: imports a rift_v1 function that does not exist.
(module
  (import "rift_v1" "flow_scan" (func (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
