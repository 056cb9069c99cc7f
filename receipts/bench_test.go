package receipts_test

import (
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

func BenchmarkSign(b *testing.B) {
	a := testKey("a")
	r := sampleReceipt()
	b.ReportAllocs()
	for b.Loop() {
		_ = receipts.Sign(a, r)
	}
}

func BenchmarkVerify(b *testing.B) {
	a := testKey("a")
	k := ring(b, "timer", a)
	sr := receipts.Sign(a, sampleReceipt())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Verify(sr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromJSON(b *testing.B) {
	js, _ := receipts.ToJSON(receipts.Sign(testKey("a"), sampleReceipt()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipts.FromJSON(js); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyBatch(b *testing.B) {
	a := testKey("a")
	k := ring(b, "timer", a)
	for _, n := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			srs := make([]receipts.SignedReceipt, n)
			for i := range srs {
				r := sampleReceipt()
				r.Intent = schemas.HashBytes([]byte(fmt.Sprint(i)))
				srs[i] = receipts.Sign(a, r)
			}
			for b.Loop() {
				for _, v := range k.VerifyBatch(srs) {
					if v.Err != nil {
						b.Fatal(v.Err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n)/1000, "µs/receipt")
		})
	}
}
