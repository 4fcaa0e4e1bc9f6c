#!/bin/bash
# coc-run --batch: the job script of one site of a coc job, for PBS Pro / Torque (qsub).
# Edit freely. coc-run fills in its placeholders (a dollar sign and a lower-case name in
# braces; docs/launcher.md, "--batch"); anything else, such as $HOME or ${PBS_JOBID},
# is left to the shell.
# The lines after the directives are the same for every scheduler, on purpose: each
# script stands alone (the scheduler runs this one file).
#PBS -N ${job_name}
#PBS -l nodes=${nodes}:ppn=${tasks_per_node}
#PBS -l walltime=${walltime}
#PBS -j oe
#PBS -o ${output}
${options}
set -e
${setup}
cd ${workdir}
# The site's agent: it connects back to coc-run's relay on the login node and starts the
# site's ranks and gateway daemons (PBS_NODEFILE says where). The token lives only here.
export COC_BATCH_CALLBACK=${callback} COC_BATCH_TOKEN=${token}
exec ${connect}
