;; hog: grows its memory by the pages asked for, writes to every page, then
;; spins (the heap watchdog, or the deadline, must stop it).
(module
  (memory 1)
  (func (export "hog") (param $pages i32)
    (local $p i32)
    (drop (memory.grow (local.get $pages)))
    (block $done
      (loop $touch
        (br_if $done (i32.ge_u (local.get $p) (i32.mul (memory.size) (i32.const 65536))))
        (i32.store8 (local.get $p) (i32.const 1))
        (local.set $p (i32.add (local.get $p) (i32.const 4096)))
        (br $touch)))
    (loop $spin (br $spin))))
