/* CURVE key files and allow files of the parameter-server transport. net.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "distdpd/net.h"

int dd_net_key_valid(const char *s) {
    if (!s || strlen(s) != DD_NET_KEY_Z85) return 0;
    static const char alpha[] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    for (int i = 0; i < DD_NET_KEY_Z85; i++)
        if (!strchr(alpha, s[i])) return 0;
    uint8_t raw[32];
    return zmq_z85_decode(raw, s) != NULL;
}

static dd_status write_file(const char *path, const char *text, mode_t mode, int force) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return dd_error(DD_ERR_IO, "path too long: %s", path); /* the reason first: the path fills the message */
    if (!force && access(path, F_OK) == 0)
        return dd_error(DD_ERR_IO, "%s exists: not overwriting a key (remove it first, or --force)", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) return dd_error(DD_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    size_t n = strlen(text);
    int ok = fchmod(fd, mode) == 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    int e = errno;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        if (ok) e = errno;
        unlink(tmp);
        return dd_error(DD_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return DD_OK;
}

dd_status dd_net_keygen(const char *base, int force, char pub_z85[DD_NET_KEY_Z85 + 1]) {
    if (!zmq_has("curve"))
        return dd_error(DD_ERR_UNSUPPORTED, "this libzmq was built without CURVE security");
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0)
        return dd_error(DD_ERR_UNSUPPORTED, "zmq_curve_keypair: %s", zmq_strerror(errno));
    char path[4096], text[256];
    snprintf(path, sizeof path, "%s.key", base);
    snprintf(text, sizeof text,
             "# distdpd CURVE secret key (Z85). Keep it private: mode 0600.\n"
             "# public key: %s\n%s\n", pub, sec);
    dd_status s = write_file(path, text, 0600, force);
    memset(sec, 0, sizeof sec);
    memset(text, 0, sizeof text);
    if (s) return s;
    snprintf(path, sizeof path, "%s.pub", base);
    snprintf(text, sizeof text, "# distdpd CURVE public key (Z85): put it in allow and cluster files\n%s\n", pub);
    DD_TRY(write_file(path, text, 0644, force));
    if (pub_z85) memcpy(pub_z85, pub, 41);
    return DD_OK;
}

/* The first non-comment, non-blank line's first word. */
dd_status dd_net_key_read(const char *path, int secret, char z85[DD_NET_KEY_Z85 + 1]) {
    if (secret) {
        struct stat st;
        if (stat(path, &st) != 0) return dd_error(DD_ERR_IO, "%s: %s", path, strerror(errno));
        if (st.st_mode & 077)
            return dd_error(DD_ERR_IO, "%s: a secret key must not be readable by others (mode %03o; chmod 600 it)",
                            path, (unsigned)(st.st_mode & 0777));
    }
    char *text;
    DD_TRY(dd_read_text(path, &text, NULL));
    dd_status s = dd_error(DD_ERR_FORMAT, "%s: no key in the file (expected a 40-character Z85 key)", path);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        /* '#' is also a Z85 character: a line is a comment when its first word is not a
         * valid key and starts with '#' */
        while (*line == ' ' || *line == '\t') line++;
        size_t w = strcspn(line, " \t\r");
        if (w == 0) continue;
        line[w] = 0;
        if (dd_net_key_valid(line)) {
            memcpy(z85, line, 41);
            s = DD_OK;
            break;
        }
        if (line[0] == '#') continue;
        s = dd_error(DD_ERR_FORMAT, "%s: expected a 40-character Z85 key, got '%.60s'", path, line);
        break;
    }
    memset(text, 0, strlen(text));
    free(text);
    return s;
}

dd_status dd_net_key_public(const char *secret_z85, char pub_z85[DD_NET_KEY_Z85 + 1]) {
    if (!dd_net_key_valid(secret_z85)) return dd_error(DD_ERR_FORMAT, "not a Z85 secret key");
    if (zmq_curve_public(pub_z85, secret_z85) != 0)
        return dd_error(DD_ERR_UNSUPPORTED, "zmq_curve_public: %s", zmq_strerror(errno));
    return DD_OK;
}

/* ---- allow files ---- */
struct dd_net_allow {
    char (*key)[41];
    char (*label)[64];
    size_t n, cap;
};

dd_status dd_net_allow_add(dd_net_allow *a, const char *z85, const char *label) {
    if (!dd_net_key_valid(z85)) return dd_error(DD_ERR_FORMAT, "'%.60s' is not a Z85 public key", z85);
    if (a->n == a->cap) {
        size_t c = a->cap ? 2 * a->cap : 16;
        void *k = realloc(a->key, c * sizeof *a->key);
        if (!k) return dd_error(DD_ERR_NOMEM, "allow list");
        a->key = k;
        void *l = realloc(a->label, c * sizeof *a->label);
        if (!l) return dd_error(DD_ERR_NOMEM, "allow list");
        a->label = l;
        a->cap = c;
    }
    memcpy(a->key[a->n], z85, 41);
    snprintf(a->label[a->n], 64, "%s", label && *label ? label : "client");
    a->n++;
    return DD_OK;
}

dd_status dd_net_allow_load(const char *path, dd_net_allow **out) {
    *out = NULL;
    dd_net_allow *a = calloc(1, sizeof *a);
    if (!a) return dd_error(DD_ERR_NOMEM, "allow list");
    char *text;
    dd_status s = dd_read_text(path, &text, NULL);
    if (s) {
        free(a);
        return s;
    }
    size_t lineno = 0;
    char *p = text;
    while (p && *p && s == DD_OK) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        lineno++;
        char *line = p;
        p = nl ? nl + 1 : NULL;
        while (*line == ' ' || *line == '\t') line++;
        size_t w = strcspn(line, " \t\r");
        if (w == 0) continue;
        char key[64] = "", label[64] = "";
        if (w == DD_NET_KEY_Z85) memcpy(key, line, w);
        if (!dd_net_key_valid(key)) {
            if (line[0] == '#') continue; /* a comment line ('#' is also a Z85 character) */
            s = dd_error(DD_ERR_FORMAT, "%s:%zu: expected a 40-character Z85 public key, got '%.*s'", path, lineno,
                         (int)(w < 60 ? w : 60), line);
            break;
        }
        /* the rest of the line is a label, up to a comment (whitespace then '#') */
        char *rest = line + w;
        while (*rest == ' ' || *rest == '\t') rest++;
        size_t lw = rest[0] == '#' ? 0 : strcspn(rest, "\r");
        for (size_t i = 1; i < lw; i++)
            if (rest[i] == '#' && (rest[i - 1] == ' ' || rest[i - 1] == '\t')) lw = i;
        while (lw > 0 && (rest[lw - 1] == ' ' || rest[lw - 1] == '\t')) lw--;
        snprintf(label, sizeof label, "%.*s", (int)(lw < 63 ? lw : 63), rest);
        if (!label[0]) snprintf(label, sizeof label, "%s:%zu", path, lineno);
        s = dd_net_allow_add(a, key, label);
    }
    free(text);
    if (s) {
        dd_net_allow_free(&a);
        return s;
    }
    *out = a;
    return DD_OK;
}

size_t dd_net_allow_count(const dd_net_allow *a) { return a ? a->n : 0; }

void dd_net_allow_free(dd_net_allow **pa) {
    if (!pa || !*pa) return;
    free((*pa)->key);
    free((*pa)->label);
    free(*pa);
    *pa = NULL;
}

/* Index of a key or -1 (used by the ZAP handler). */
int dd_net_allow_find_(const dd_net_allow *a, const char *z85, const char **label);
int dd_net_allow_find_(const dd_net_allow *a, const char *z85, const char **label) {
    for (size_t i = 0; a && i < a->n; i++)
        if (strcmp(a->key[i], z85) == 0) {
            if (label) *label = a->label[i];
            return (int)i;
        }
    return -1;
}
