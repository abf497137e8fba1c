// Nothing to call: this target only interposes C11 thrd_create (see sanitizer_threads.c).
#pragma once
