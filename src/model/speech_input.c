#include "model/speech_input.h"

os_proj_dims os_model_proj_dims(const os_model *m) {
    return (os_proj_dims){.k = m->oc.proj_k, .d = m->enc.d, .hidden = m->oc.proj_hidden, .C = m->C,
                          .kind = m->oc.proj_kind};
}

// the projector's parameters, its bucket open
static os_proj_w proj_weights(const os_model *m, const os_weights *w) {
    return (os_proj_w){os_weight_t(w, m->proj_w1), os_weight(w, m->proj_b1), os_weight_t(w, m->proj_w2),
                       os_weight(w, m->proj_b2), m->proj_cw >= 0 ? os_weight_t(w, m->proj_cw) : os_tensor_none(),
                       m->proj_cb >= 0 ? os_weight(w, m->proj_cb) : NULL};
}

void os_projector_forward(const os_model *m, const os_weights *w, int64_t B, const int *on, const float *feat,
                          int64_t T_enc, int64_t T_s, float *act, float *out) {
    os_proj_dims pd = os_model_proj_dims(m);
    int64_t n_act = os_projector_act_floats(&pd);
    w->gather(w->ctx, m->b_proj);
    os_proj_w pw = proj_weights(m, w);
    for (int64_t b = 0; b < B; b++)
        if (on[b]) os_projector_fwd(&pd, &pw, feat + b * T_enc * pd.d, T_s, act + b * T_s * n_act, out + b * T_s * pd.C);
    w->release(w->ctx, m->b_proj);
}

void os_projector_backward(const os_model *m, const os_weights *w, const os_grads *g, int64_t B, const int *on,
                           const float *feat, int64_t T_enc, int64_t T_s, const float *act, const float *dout,
                           float *scratch) {
    os_proj_dims pd = os_model_proj_dims(m);
    int64_t n_act = os_projector_act_floats(&pd);
    int trained = m->reg.b[m->b_proj].trainable;   // a frozen projector needs no backward
    w->gather(w->ctx, m->b_proj);
    g->open(g->ctx, m->b_proj);
    os_proj_w pw = proj_weights(m, w);
    os_proj_g pg = {os_grad(g, m->proj_w1), os_grad(g, m->proj_b1), os_grad(g, m->proj_w2), os_grad(g, m->proj_b2),
                    m->proj_cw >= 0 ? os_grad(g, m->proj_cw) : NULL, m->proj_cb >= 0 ? os_grad(g, m->proj_cb) : NULL};
    for (int64_t b = 0; trained && b < B; b++)
        if (on[b])
            os_projector_bwd(&pd, &pw, feat + b * T_enc * pd.d, act + b * T_s * n_act, dout + b * T_s * pd.C, T_s,
                             scratch, &pg);
    g->close(g->ctx, m->b_proj);
    w->release(w->ctx, m->b_proj);
}
