// librdkafka uses C11 threads (`thrd_create`, `mtx_*`, `cnd_*`). glibc implements those without
// going through the `pthread_*` calls that ThreadSanitizer intercepts, so under TSan:
//  - a thread started with `thrd_create` has no TSan state, and its first allocation crashes the
//    TSan runtime;
//  - librdkafka's locks and condition variables are invisible, so every hand-over through its
//    queues (a record's opaque going from the producing thread to the delivery-report thread, say)
//    is reported as a data race.
// Defining these functions in the test executable interposes glibc's (the linker exports them
// because librdkafka references them) and routes each through its pthread equivalent, which TSan
// sees. glibc's `mtx_t` and `cnd_t` are the same objects as `pthread_mutex_t` and `pthread_cond_t`,
// and the thread's int result travels in the pointer-sized pthread result, as in glibc itself.
// Tests only: nothing in Sources links this.
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

static int c11_result(int err) {
    switch (err) {
    case 0: return thrd_success;
    case ENOMEM: return thrd_nomem;
    case EBUSY: return thrd_busy;
    case ETIMEDOUT: return thrd_timedout;
    default: return thrd_error;
    }
}

struct start_context {
    thrd_start_t function;
    void *argument;
};

static void *start(void *raw) {
    struct start_context context = *(struct start_context *)raw;
    free(raw);
    return (void *)(intptr_t)context.function(context.argument);
}

int thrd_create(thrd_t *thread, thrd_start_t function, void *argument) {
    struct start_context *context = malloc(sizeof *context);
    if (context == NULL) return thrd_nomem;
    context->function = function;
    context->argument = argument;
    int err = pthread_create((pthread_t *)thread, NULL, start, context);
    if (err != 0) free(context);
    return c11_result(err);
}

int thrd_join(thrd_t thread, int *result) {
    void *value = NULL;
    int err = pthread_join((pthread_t)thread, &value);
    if (err == 0 && result != NULL) *result = (int)(intptr_t)value;
    return c11_result(err);
}

int mtx_init(mtx_t *mutex, int type) {
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
    int err = pthread_mutex_init((pthread_mutex_t *)mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return c11_result(err);
}

int mtx_lock(mtx_t *mutex) { return c11_result(pthread_mutex_lock((pthread_mutex_t *)mutex)); }
int mtx_trylock(mtx_t *mutex) { return c11_result(pthread_mutex_trylock((pthread_mutex_t *)mutex)); }
int mtx_timedlock(mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    return c11_result(pthread_mutex_timedlock((pthread_mutex_t *)mutex, deadline));
}
int mtx_unlock(mtx_t *mutex) { return c11_result(pthread_mutex_unlock((pthread_mutex_t *)mutex)); }
void mtx_destroy(mtx_t *mutex) { pthread_mutex_destroy((pthread_mutex_t *)mutex); }

int cnd_init(cnd_t *condition) { return c11_result(pthread_cond_init((pthread_cond_t *)condition, NULL)); }
int cnd_signal(cnd_t *condition) { return c11_result(pthread_cond_signal((pthread_cond_t *)condition)); }
int cnd_broadcast(cnd_t *condition) { return c11_result(pthread_cond_broadcast((pthread_cond_t *)condition)); }
int cnd_wait(cnd_t *condition, mtx_t *mutex) {
    return c11_result(pthread_cond_wait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex));
}
int cnd_timedwait(cnd_t *restrict condition, mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    return c11_result(pthread_cond_timedwait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex, deadline));
}
void cnd_destroy(cnd_t *condition) { pthread_cond_destroy((pthread_cond_t *)condition); }
