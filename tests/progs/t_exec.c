/* t_exec.c -- a process that fails an allocation, then execs itself: the
 * new image is traced too (LD_PRELOAD stays) and writes its own dump,
 * without the records of the image before it. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *first_image(void) {
    void *p = NULL;
    cudaMalloc(&p, 1 << 20);
    void *q = NULL;
    cudaMalloc(&q, (size_t)1 << 40); /* out of memory: the first image's dump */
    return p;
}

static void *second_image(void) {
    void *p = NULL;
    cudaMalloc(&p, 4096);
    return p;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "second") == 0) {
        second_image();
        printf("second image\n");
        return 0;
    }
    first_image();
    printf("first image\n");
    fflush(stdout);
    execl("/proc/self/exe", argv[0], "second", (char *)NULL);
    perror("execl");
    return 1;
}
