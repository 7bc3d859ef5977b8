set -x
uname -a; cat /etc/os-release | head -3; id
cat /proc/driver/nvidia/version; ls -la /proc/driver/nvidia/ 2>&1 | head
cat /sys/module/nvidia/version; ls /sys/module | grep -i nvidia; grep -i -E "nvidia|nouveau" /proc/modules
ls -la /dev/nvidia* /dev/nvidia-caps 2>&1
stat -c '%n %F %t:%T %a %U:%G' /dev/nvidia* 2>&1
ls -la /usr/local/nvidia /usr/local/nvidia/lib64 2>&1 | head -80
ls /usr/local/nvidia/bin 2>&1
find / -xdev -name 'libcuda.so*' 2>/dev/null | head -20
ls -la /usr/local/cuda*/lib64/stubs/ /usr/local/cuda/targets/*/lib/stubs/ 2>&1 | head -20
ldconfig -p | grep -E "libcuda|nvidia-ml|ptxjit" 
which python3 python3.12; python3 -V; python3 -c 'import pynvml,yaml;print(pynvml.__file__, yaml.__version__)'
ls /usr/bin/python3* ; /usr/bin/python3 -V
mount | grep -E "cgroup|nvidia" | head; cat /proc/self/cgroup | head -3
nvidia-smi; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
ls /etc/cdi /var/run/cdi 2>&1; which nvidia-ctk podman docker containerd runc
cat /proc/cpuinfo | grep -m1 "model name"
set +x
t0=$(date +%s.%N)
bash .gpu-lab/device-setup.sh && source .gpu-lab/env.sh
echo "setup took $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || python3 -c "import time;print(time.time()-$t0)")"
ansible --version | head -2
mkdir -p /var/run/cdi
lib=$(ls /usr/local/nvidia/lib64/libcuda.so.5* | head -1); ml=$(ls /usr/local/nvidia/lib64/libnvidia-ml.so.5* | head -1); pj=$(ls /usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.5* | head -1)
cat > /var/run/cdi/gpuprobe-recon.yaml <<Y
cdiVersion: "0.5.0"
kind: gpuprobe.local/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
    - path: /dev/nvidiactl
    - path: /dev/nvidia-uvm
    - path: /dev/nvidia-uvm-tools
    mounts:
    - {hostPath: $lib, containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, options: [ro, nosuid, nodev, bind]}
    - {hostPath: $ml, containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1, options: [ro, nosuid, nodev, bind]}
    - {hostPath: $pj, containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1, options: [ro, nosuid, nodev, bind]}
Y
time podman run --rm --network=none --device gpuprobe.local/gpu=0 localhost/probe-python:host python3 -c 'import os,ctypes;print(sorted(os.listdir("/dev")));l=ctypes.CDLL("libcuda.so.1");print("cuInit",l.cuInit(0))'
podman run --rm --network=none --device gpuprobe.local/gpu=0 localhost/probe-python:host python3 -c 'print(open("/proc/self/mountinfo").read())' | tail -8
podman run --rm localhost/probe-python:host python3 -c 'import os;print(os.path.exists("/sbin/ldconfig"), os.listdir("/usr/lib/x86_64-linux-gnu")[:20])'
podman run --rm --device gpuprobe.local/gpu=99 localhost/probe-python:host true; echo rc=$?
rm -f /var/run/cdi/gpuprobe-recon.yaml
podman images; podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Version}} {{.Host.CgroupsVersion}} {{.Store.GraphDriverName}}'
