#include "train/trainer.h"
#include "core/err.h"
#include "core/numtext.h"
#include "kernels/ops.h"
#include <float.h>
#include <stdio.h>
#include <string.h>

int os_param_term_parse(const char *s, os_param_term *out) {
    memset(out, 0, sizeof *out);
    const char *pre = NULL, *end;
    double c;
    if (!strncmp(s, "l2:", 3)) {
        if (os_parse_decimal_prefix(s + 3, &end, &c) < 0 || *end != ':' || c < 0 || c > FLT_MAX)
            return os_errf("--param_loss '%s': the l2 weight must be a decimal number in [0,3.4e38] (l2:COEF:PARAM_PREFIX)", s);
        out->kind = OS_TERM_L2, out->coef = (float)c, pre = end + 1;
    } else if (!strncmp(s, "dummy:", 6)) {
        out->kind = OS_TERM_DUMMY, out->coef = 0.0f, pre = s + 6;
    }
    if (!pre || !*pre || strlen(pre) >= sizeof out->prefix || strpbrk(pre, " \t"))
        return os_errf("--param_loss '%s': expected l2:COEF:PARAM_PREFIX or dummy:PARAM_PREFIX", s);
    snprintf(out->prefix, sizeof out->prefix, "%s", pre);
    return 0;
}

// Loss terms over the parameters of bucket b: evaluated inside its gather scope, their gradient added to the
// bucket's gradient before it is reduced (design invariant 5). Called with b's gradient scope open.
void os_apply_param_terms(os_trainer *t, int b) {
    float dscale = t->term_scale;
    const os_registry *r = &t->m->reg;
    for (int k = 0; k < t->nterms; k++) {
        const os_param_term *pt = &t->terms[k];
        size_t n = strlen(pt->prefix);
        int gathered = 0;
        for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) {
            if (strncmp(r->p[i].name, pt->prefix, n)) continue;
            if (!gathered) zr_gather(t->rt, b), gathered = 1;
            const float *p = zr_param(t->rt, i);
            float *g = zr_grad(t->rt, i);   // NULL: frozen (the term has a value but moves nothing)
            int64_t ne = r->p[i].numel;
            os_k->sumsq(p, ne, &t->term_vals[(int64_t)i * t->nterms + k]);
            if (pt->kind == OS_TERM_L2 && g) os_k->axpy(g, 2.0f * pt->coef * dscale, p, ne);
        }
        if (gathered) zr_release(t->rt, b);
    }
}

double os_param_terms_value(const os_trainer *t, int b, const double *vals) {
    double loss = 0.0;
    const os_registry *r = &t->m->reg;
    for (int k = 0; k < t->nterms; k++) {
        const os_param_term *pt = &t->terms[k];
        size_t n = strlen(pt->prefix);
        for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) {
            if (strncmp(r->p[i].name, pt->prefix, n)) continue;
            double s = vals[(int64_t)i * t->nterms + k];
            // dummy: d(0 * sum p)/dp = 0, nothing to add, but the value is honest: 0 * sum p^2 is NaN exactly
            // where 0 * sum p is (a NaN or infinite element; float squares summed in double do not overflow)
            loss += pt->kind == OS_TERM_L2 ? pt->coef * s : 0.0 * s;
        }
    }
    return loss;
}
