;; feature_hash.wat: signed feature hashing ("the hashing trick") for a
;; bidding module's Wasm helper. The .wasm next to it is built from this file
;; with Debian's wabt: `wat2wasm feature_hash.wat -o feature_hash.wasm`
;; (go generate ./examples/..., or make wasm); a test rebuilds it and compares.
;;
;; hash_features(in, len, out, buckets): the bytes [in, in+len) are features
;; separated by 0 bytes; out receives `buckets` f32 counts: each feature's
;; 32-bit FNV-1a hash h adds (h & 1 ? -1 : +1) to bucket (h >>> 1) % buckets.
(module
  (memory (export "memory") 1)

  ;; fnv1a(ptr, len): the 32-bit FNV-1a hash of the bytes [ptr, ptr+len).
  (func $fnv1a (export "fnv1a") (param $p i32) (param $n i32) (result i32)
    (local $h i32) (local $end i32)
    (local.set $h (i32.const 0x811c9dc5))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $h (i32.mul (i32.xor (local.get $h) (i32.load8_u (local.get $p)))
                               (i32.const 0x01000193)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (local.get $h))

  (func (export "hash_features") (param $in i32) (param $len i32) (param $out i32) (param $nb i32)
    (local $i i32) (local $end i32) (local $start i32) (local $h i32) (local $slot i32)
    ;; zero the output
    (local.set $i (i32.const 0))
    (block $zeroed
      (loop $zero
        (br_if $zeroed (i32.ge_u (local.get $i) (local.get $nb)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2))) (f32.const 0))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $zero)))
    (local.set $end (i32.add (local.get $in) (local.get $len)))
    (local.set $start (local.get $in))
    (local.set $i (local.get $in))
    (block $done
      (loop $scan
        ;; at the end or at a separator: count the feature [start, i)
        (if (i32.or (i32.ge_u (local.get $i) (local.get $end))
                    (i32.eqz (i32.load8_u (local.get $i))))
          (then
            (if (i32.gt_u (local.get $i) (local.get $start))
              (then
                (local.set $h (call $fnv1a (local.get $start) (i32.sub (local.get $i) (local.get $start))))
                (local.set $slot (i32.add (local.get $out)
                  (i32.shl (i32.rem_u (i32.shr_u (local.get $h) (i32.const 1)) (local.get $nb)) (i32.const 2))))
                (f32.store (local.get $slot)
                  (f32.add (f32.load (local.get $slot))
                    (select (f32.const -1) (f32.const 1) (i32.and (local.get $h) (i32.const 1)))))))
            (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
            (local.set $start (i32.add (local.get $i) (i32.const 1)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan))))
)
