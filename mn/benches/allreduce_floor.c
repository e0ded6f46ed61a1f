/* The floor under data_parallel.py's ratios: what a step of two ranks costs beyond its compute
 * on this machine when nothing of kusari is involved. Every rank runs the same deterministic
 * arithmetic for COMPUTE_US microseconds (no memory traffic, calibrated on rank 0 and
 * broadcast, so the ranks' work is identical), then all-reduces FLOATS float32 values, STEPS
 * times. What a step costs beyond COMPUTE_US is the all-reduce plus the waiting for the other
 * rank's delays (the scheduler, the hypervisor): no implementation of the exchange can do
 * better on the same machine.
 *
 *     mpicc -O2 mn/benches/allreduce_floor.c -o target/allreduce_floor
 *     mpirun -np 2 target/allreduce_floor COMPUTE_US STEPS FLOATS
 *
 * prints `floor: E us a step beyond C us of compute` (rank 0; E is the step's wall time less
 * the mean compute time of the ranks). data_parallel.py builds and runs it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A chain of dependent multiply-adds: the same time on every run, no memory traffic. */
static double spin(long iterations, double x) {
    for (long i = 0; i < iterations; i++) x = x * 1.0000001 + 1e-9;
    return x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: allreduce_floor COMPUTE_US STEPS FLOATS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double compute_us = atof(argv[1]);
    long steps = atol(argv[2]);
    long n = atol(argv[3]);
    if (compute_us < 0 || steps < 1 || n < 1 || n > (1L << 28)) {
        if (rank == 0) fprintf(stderr, "allreduce_floor: arguments out of range\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *send = malloc(n * sizeof(float)), *recv = malloc(n * sizeof(float));
    if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
    for (long i = 0; i < n; i++) send[i] = (float)(i % 1000);

    /* Iterations a microsecond: the fastest of five timings of a million. */
    /* Volatile, so that the compiler keeps the arithmetic whose result nothing reads. */
    volatile double sink = 1;
    double per_us = 0;
    for (int k = 0; k < 5; k++) {
        double t0 = now();
        sink = spin(1000000, sink);
        double rate = 1e6 / ((now() - t0) * 1e6);
        if (rate > per_us) per_us = rate;
    }
    MPI_Bcast(&per_us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    long iterations = (long)(compute_us * per_us);

    for (int k = 0; k < 20; k++) {
        sink = spin(iterations, sink);
        MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double computing = 0, t0 = now();
    for (long s = 0; s < steps; s++) {
        double c0 = now();
        sink = spin(iterations, sink);
        computing += now() - c0;
        MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double wall = now() - t0, mean_computing;
    MPI_Reduce(&computing, &mean_computing, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        mean_computing /= size;
        printf("floor: %.1f us a step beyond %.1f us of compute (%d ranks, %ld floats)\n",
               (wall - mean_computing) / steps * 1e6, mean_computing / steps * 1e6, size, n);
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
