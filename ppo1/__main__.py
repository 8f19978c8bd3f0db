"""The command line: `python -m ppo1 ARGS`, the `ppo1` command and `python -m run_atari ARGS` (see --help); under
mpirun each rank runs it (`mpirun -np N python -m ppo1 ...`, or `--np N`, which starts them so)."""
import os
import sys


def main(module: str = "ppo1") -> int:
    """Run the command line of `sys.argv`; `module`: the module its ranks run when --np starts them (`ppo1` or
    `run_atari`, as this process was started). Returns the exit status."""
    try:
        from ppo1.launch import HeldInterrupt

        held = HeldInterrupt().hold()  # Ctrl-C waits until every rank is past MPI_Init (see HeldInterrupt)
        from ppo1.cli import main as cli_main

        code = cli_main(held=held, module=module)
        from ppo1.distributed import flush_console

        flush_console()  # before MPI_Finalize (mpi4py's atexit), which Python runs before its own flush
        return code
    except KeyboardInterrupt:  # Ctrl-C before the hold (while ppo1.launch loads): one line from rank 0
        from ppo1.launch import say_interrupted_while_starting

        say_interrupted_while_starting()
        sys.stdout.flush()
        os._exit(130)  # as HeldInterrupt's second Ctrl-C: no clean-up of a start that was cut short


if __name__ == "__main__":
    sys.exit(main())
