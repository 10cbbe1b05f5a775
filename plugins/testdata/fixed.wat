;; fixed: handle answers the same envelope every call,
;; {1: 200, 2: {"x": "y"}, 3: h'6869'}; other answers {1: 404}.
(module
  (import "rift_v1" "response_write" (func $response_write (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\a3\01\18\c8\02\a1\61x\61y\03\42hi")
  (data (i32.const 32) "\a1\01\19\01\94")
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    (call $response_write (i32.const 0) (i32.const 14)))
  (func (export "other") (param i32) (result i32)
    (call $response_write (i32.const 32) (i32.const 5))))
