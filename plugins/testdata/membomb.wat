;; membomb: grows memory until memory.grow fails, then traps.
(module
  (memory (export "memory") 1)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable))
