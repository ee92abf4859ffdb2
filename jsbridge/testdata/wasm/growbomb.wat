;; growbomb: grows its memory a page at a time until memory.grow fails;
;; returns the pages it ended with.
(module
  (memory (export "memory") 1)
  (func (export "bomb") (result i32)
    (block $full
      (loop $more
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $more)))
    (memory.size)))
