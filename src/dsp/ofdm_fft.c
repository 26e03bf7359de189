/* Deterministic mixed-radix + Bluestein complex FFT in double precision for the OFDM
 * generator (see ofdm_fft.h for why it is not FFTW). The radix stages follow the
 * structure of kissfft (decimation in time, recursive, out of place): radix 4 and 2
 * have dedicated butterflies, every other factor uses the generic O(p^2) butterfly.
 * Lengths with a prime factor above DD_FFT_MAX_RADIX go through Bluestein's chirp-z
 * algorithm on a power-of-two plan. */
#include "dsp/ofdm_fft.h"

#include <complex.h>
#include <math.h>
#include <string.h>

#define DD_FFT_MAX_RADIX 61 /* generic butterflies up to this prime; Bluestein above */
#define DD_FFT_MAX_FACTORS 64

typedef struct {
    double r, i;
} cpx;

struct dd_ofdm_fft {
    size_t n;                          /* transform length */
    size_t nfac;                       /* number of (p, m) pairs in fac */
    size_t fac[2 * DD_FFT_MAX_FACTORS]; /* radix p, remaining length m, per stage */
    cpx *tw;                           /* tw[j] = exp(-2 pi i j / n), j < n */
    cpx *in, *out;                     /* staging buffers, n each */
    cpx *scratch;                      /* generic butterfly scratch, max radix */
    /* Bluestein (blue != 0): chirp w[k] = exp(-i pi k^2 / n), sub-plan of length m2. */
    int blue;
    size_t m2;
    dd_ofdm_fft *sub;
    cpx *chirp; /* n */
    cpx *bfft;  /* m2: FFT of the conjugate chirp, already divided by m2 */
    cpx *work;  /* m2 */
};

static inline cpx cmul(cpx a, cpx b) {
    cpx c;
    c.r = a.r * b.r - a.i * b.i;
    c.i = a.r * b.i + a.i * b.r;
    return c;
}

/* exp(-2 pi i num / den) for 0 <= num < den, from cos/sin of an exact integer ratio. */
static cpx twiddle(size_t num, size_t den) {
    cpx w;
    double a = -2.0 * M_PI * (double)num / (double)den;
    w.r = cos(a);
    w.i = sin(a);
    return w;
}

/* Factors n into radices 4, 2, 3, 5, 7, ... (kissfft order). Returns the largest. */
static size_t factorize(size_t n, size_t *fac, size_t *nfac) {
    size_t p = 4, largest = 1, k = 0;
    size_t fsqrt = (size_t)floor(sqrt((double)n));
    if (n == 1) {
        fac[0] = 1;
        fac[1] = 1;
        *nfac = 1;
        return 1;
    }
    while (n > 1) {
        while (n % p) {
            if (p == 4)
                p = 2;
            else if (p == 2)
                p = 3;
            else
                p += 2;
            if (p > fsqrt) p = n;
        }
        n /= p;
        fac[2 * k] = p;
        fac[2 * k + 1] = n;
        k++;
        if (p > largest) largest = p;
    }
    *nfac = k;
    return largest;
}

static void bfly2(cpx *F, size_t fstride, const cpx *tw, size_t m) {
    for (size_t k = 0; k < m; k++) {
        cpx t = cmul(F[k + m], tw[k * fstride]);
        F[k + m].r = F[k].r - t.r;
        F[k + m].i = F[k].i - t.i;
        F[k].r += t.r;
        F[k].i += t.i;
    }
}

static void bfly4(cpx *F, size_t fstride, const cpx *tw, size_t m) {
    for (size_t k = 0; k < m; k++) {
        cpx s0 = cmul(F[k + m], tw[k * fstride]);
        cpx s1 = cmul(F[k + 2 * m], tw[2 * k * fstride]);
        cpx s2 = cmul(F[k + 3 * m], tw[3 * k * fstride]);
        cpx s5 = {F[k].r - s1.r, F[k].i - s1.i};
        cpx s3, s4;
        F[k].r += s1.r;
        F[k].i += s1.i;
        s3.r = s0.r + s2.r;
        s3.i = s0.i + s2.i;
        s4.r = s0.r - s2.r;
        s4.i = s0.i - s2.i;
        F[k + 2 * m].r = F[k].r - s3.r;
        F[k + 2 * m].i = F[k].i - s3.i;
        F[k].r += s3.r;
        F[k].i += s3.i;
        F[k + m].r = s5.r + s4.i;
        F[k + m].i = s5.i - s4.r;
        F[k + 3 * m].r = s5.r - s4.i;
        F[k + 3 * m].i = s5.i + s4.r;
    }
}

static void bfly_generic(cpx *F, size_t fstride, const cpx *tw, size_t m, size_t p, size_t n,
                         cpx *scratch) {
    for (size_t u = 0; u < m; u++) {
        size_t k = u;
        for (size_t q1 = 0; q1 < p; q1++) {
            scratch[q1] = F[k];
            k += m;
        }
        k = u;
        for (size_t q1 = 0; q1 < p; q1++) {
            size_t twidx = 0;
            cpx acc = scratch[0];
            for (size_t q = 1; q < p; q++) {
                twidx += fstride * k;
                if (twidx >= n) twidx -= n;
                cpx t = cmul(scratch[q], tw[twidx]);
                acc.r += t.r;
                acc.i += t.i;
            }
            F[k] = acc;
            k += m;
        }
    }
}

static void work(const dd_ofdm_fft *P, cpx *Fout, const cpx *f, size_t fstride,
                 const size_t *fac) {
    size_t p = fac[0], m = fac[1];
    cpx *beg = Fout, *end = Fout + p * m;
    if (m == 1) {
        do {
            *Fout = *f;
            f += fstride;
        } while (++Fout != end);
    } else {
        do {
            work(P, Fout, f, fstride * p, fac + 2);
            f += fstride;
        } while ((Fout += m) != end);
    }
    Fout = beg;
    if (p == 2)
        bfly2(Fout, fstride, P->tw, m);
    else if (p == 4)
        bfly4(Fout, fstride, P->tw, m);
    else if (p > 1)
        bfly_generic(Fout, fstride, P->tw, m, p, P->n, P->scratch);
}

/* Forward transform of P->in into P->out (mixed-radix plans only). */
static void run_radix(const dd_ofdm_fft *P) {
    if (P->n == 1) {
        P->out[0] = P->in[0];
        return;
    }
    work(P, P->out, P->in, 1, P->fac);
}

void dd_ofdm_fft_destroy(dd_ofdm_fft **pp) {
    if (!pp || !*pp) return;
    dd_ofdm_fft *P = *pp;
    dd_free(P->tw);
    dd_free(P->in);
    dd_free(P->out);
    dd_free(P->scratch);
    dd_ofdm_fft_destroy(&P->sub);
    dd_free(P->chirp);
    dd_free(P->bfft);
    dd_free(P->work);
    dd_free(P);
    *pp = NULL;
}

size_t dd_ofdm_fft_size(const dd_ofdm_fft *p) { return p ? p->n : 0; }

dd_status dd_ofdm_fft_create(size_t n, dd_ofdm_fft **out) {
    dd_status st = DD_OK;
    dd_ofdm_fft *P = NULL;
    if (!out) return dd_error(DD_ERR_ARG, "dd_ofdm_fft_create: out is NULL");
    *out = NULL;
    if (n < 1 || n > ((size_t)1 << 30))
        return dd_error(DD_ERR_ARG, "dd_ofdm_fft_create: length n = %zu outside 1..2^30", n);
    P = dd_calloc(1, sizeof *P);
    if (!P) return DD_ERR_NOMEM;
    P->n = n;
    size_t largest = factorize(n, P->fac, &P->nfac);
    P->in = dd_calloc(n, sizeof(cpx));
    P->out = dd_calloc(n, sizeof(cpx));
    if (!P->in || !P->out) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }
    if (largest > DD_FFT_MAX_RADIX) {
        /* Bluestein: X[k] = w[k] sum_j (x[j] w[j]) conj(w[k-j]), w[k] = exp(-i pi k^2/n). */
        size_t m2 = 1;
        while (m2 < 2 * n - 1) m2 <<= 1;
        P->blue = 1;
        P->m2 = m2;
        st = dd_ofdm_fft_create(m2, &P->sub);
        if (st != DD_OK) goto cleanup;
        P->chirp = dd_calloc(n, sizeof(cpx));
        P->bfft = dd_calloc(m2, sizeof(cpx));
        P->work = dd_calloc(m2, sizeof(cpx));
        if (!P->chirp || !P->bfft || !P->work) {
            st = DD_ERR_NOMEM;
            goto cleanup;
        }
        for (size_t k = 0; k < n; k++) {
            /* k^2 mod 2n keeps the angle argument small and exact. */
            uint64_t k2 = ((uint64_t)k * (uint64_t)k) % (2u * (uint64_t)n);
            P->chirp[k] = twiddle((size_t)k2, 2 * n);
        }
        dd_ofdm_fft *S = P->sub;
        memset(S->in, 0, m2 * sizeof(cpx));
        for (size_t k = 0; k < n; k++) {
            cpx c = {P->chirp[k].r, -P->chirp[k].i};
            S->in[k] = c;
            if (k) S->in[m2 - k] = c;
        }
        run_radix(S);
        for (size_t k = 0; k < m2; k++) {
            P->bfft[k].r = S->out[k].r / (double)m2;
            P->bfft[k].i = S->out[k].i / (double)m2;
        }
    } else {
        P->tw = dd_calloc(n, sizeof(cpx));
        P->scratch = dd_calloc(largest, sizeof(cpx));
        if (!P->tw || !P->scratch) {
            st = DD_ERR_NOMEM;
            goto cleanup;
        }
        for (size_t j = 0; j < n; j++) P->tw[j] = twiddle(j, n);
    }
    *out = P;
    return DD_OK;
cleanup:
    if (st == DD_ERR_NOMEM) dd_error(st, "dd_ofdm_fft_create: out of memory for length %zu", n);
    dd_ofdm_fft_destroy(&P);
    return st;
}

/* Bluestein forward transform of P->in into P->out. */
static void run_blue(dd_ofdm_fft *P) {
    dd_ofdm_fft *S = P->sub;
    size_t n = P->n, m2 = P->m2;
    memset(S->in, 0, m2 * sizeof(cpx));
    for (size_t k = 0; k < n; k++) S->in[k] = cmul(P->in[k], P->chirp[k]);
    run_radix(S);
    /* Inverse of (A .* B) through conj(FFT(conj(.))). */
    for (size_t k = 0; k < m2; k++) {
        cpx t = cmul(S->out[k], P->bfft[k]);
        S->in[k].r = t.r;
        S->in[k].i = -t.i;
    }
    run_radix(S);
    for (size_t k = 0; k < n; k++) {
        cpx t = {S->out[k].r, -S->out[k].i};
        P->out[k] = cmul(t, P->chirp[k]);
    }
}

void dd_ofdm_fft_exec(dd_ofdm_fft *P, dd_cf64 *data, int inverse) {
    size_t n = P->n;
    double sgn = inverse ? -1.0 : 1.0; /* inverse = conj(FFT(conj(x))) */
    for (size_t k = 0; k < n; k++) {
        P->in[k].r = creal(data[k]);
        P->in[k].i = sgn * cimag(data[k]);
    }
    if (P->blue)
        run_blue(P);
    else
        run_radix(P);
    for (size_t k = 0; k < n; k++) data[k] = CMPLX(P->out[k].r, sgn * P->out[k].i);
}
