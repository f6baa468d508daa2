# AOT ID: ['1_backward']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


cpp_fused_sum_view_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
        {
            {
                float tmp_acc0 = 0;
                at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(1L))
                {
                    {
                        if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                            tmp_acc0_vec = tmp_acc0_vec + tmp0;
                        }
                    }
                }
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                {
                    tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__softmax_backward_data_mul_1 = async_compile.cpp_pybinding(['float*', 'const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    auto in_ptr1 = in_out_ptr0;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(16L); x0+=static_cast<int64_t>(1L))
        {
            {
                float tmp_acc0 = 0;
                at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(8L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0L) && x1 < static_cast<int64_t>(8L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 8L*x0), static_cast<int64_t>(8L));
                            auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 8L*x0), static_cast<int64_t>(8L));
                            auto tmp2 = tmp0 * tmp1;
                            tmp_acc0_vec = sum_masked_reduce(tmp_acc0_vec, tmp2, static_cast<int64_t>(8L));
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr0[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(8L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0L) && x1 < static_cast<int64_t>(8L)))
                    {
                        auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 8L*x0), static_cast<int64_t>(8L));
                        auto tmp2 = out_ptr0[static_cast<int64_t>(x0)];
                        auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 8L*x0), static_cast<int64_t>(8L));
                        auto tmp1 = tmp0.neg();
                        auto tmp4 = tmp3 * tmp0;
                        auto tmp5 = at::vec::Vectorized<float>(tmp2);
                        auto tmp6 = fmadd(tmp1, tmp5, tmp4);
                        auto tmp7 = static_cast<float>(0.1767766952966369);
                        auto tmp8 = at::vec::Vectorized<float>(tmp7);
                        auto tmp9 = tmp6 * tmp8;
                        tmp9.store(in_out_ptr0 + static_cast<int64_t>(x1 + 8L*x0), static_cast<int64_t>(8L));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_cat_transpose_2 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(16L); x0+=static_cast<int64_t>(1L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                    {
                        auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                        tmp0.store(out_ptr0 + static_cast<int64_t>(x1 + 96L*x0));
                    }
                }
            }
        }
    }
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(8L); x1+=static_cast<int64_t>(16L))
            {
                for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(32L); x2+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0L) && x1 < static_cast<int64_t>(8L) && x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(32L)))
                        {
                            alignas(std::max(std::size_t(16), alignof(float))) float tmp0[16*16];
                            transpose_mxn<float,static_cast<int64_t>(16),static_cast<int64_t>(8L),false>(in_ptr1 + static_cast<int64_t>(x1 + 8L*x2 + 256L*x0), static_cast<int64_t>(8L), tmp0, static_cast<int64_t>(16));
                            for (long x1_inner = 0; x1_inner < static_cast<int64_t>(8L); x1_inner++)
                            {
                                auto tmp1 = at::vec::Vectorized<float>::loadu(tmp0 + static_cast<int64_t>(16L*x1_inner), static_cast<int64_t>(16));
                                tmp1.store(out_ptr1 + static_cast<int64_t>(x2 + 96L*x1 + 96L*x1_inner + 768L*x0));
                            }
                        }
                    }
                }
            }
        }
    }
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(16L); x0+=static_cast<int64_t>(1L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                    {
                        auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                        tmp0.store(out_ptr2 + static_cast<int64_t>(x1 + 96L*x0));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_add_mul_sigmoid_sigmoid_backward_sum_tanh_tanh_backward_view_3 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(96L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(96L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 96L*x1), static_cast<int64_t>(16));
                                tmp_acc0_vec = tmp_acc0_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(96L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        #pragma omp single
        {
            {
                for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(512L); x0+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(512L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                            auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                            auto tmp4 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                            auto tmp1 = tmp0.tanh();
                            auto tmp2 = decltype(tmp0)(1)/(decltype(tmp0)(1) + tmp0.neg().exp());
                            auto tmp5 = tmp3 + tmp4;
                            auto tmp6 = tmp5 * tmp1;
                            auto tmp7 = static_cast<float>(1.0);
                            auto tmp8 = at::vec::Vectorized<float>(tmp7);
                            auto tmp9 = tmp8 - tmp2;
                            auto tmp10 = tmp2 * tmp9;
                            auto tmp11 = tmp6 * tmp10;
                            auto tmp12 = tmp5 * tmp2;
                            auto tmp13 = tmp1 * tmp1;
                            auto tmp14 = tmp8 - tmp13;
                            auto tmp15 = tmp12 * tmp14;
                            auto tmp16 = tmp11 + tmp15;
                            tmp16.store(in_out_ptr0 + static_cast<int64_t>(x0));
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        primals_1, primals_2, primals_4, view, div, view_8, permute_8, permute_9, permute_10, tangents_1 = args
        args.clear()
        assert_size_stride(tangents_1, (2, 8, 32), (256, 32, 1), 'input')
        assert_size_stride(primals_4, (32, 32), (32, 1), 'input')
        buf0 = empty_strided_cpu((16, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_10, linear_1, permute_3, mm], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(tangents_1, (16, 32), (32, 1), 0), primals_4, out=buf0)
        del primals_4
        assert_size_stride(view_8, (16, 32), (32, 1), 'input')
        buf1 = empty_strided_cpu((32, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_10, permute_4, mm_1], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(tangents_1, (32, 16), (1, 32), 0), view_8, out=buf1)
        del view_8
        buf2 = empty_strided_cpu((1, 32), (32, 1), torch.float32)
        assert_size_stride(div, (2, 8, 8), (64, 8, 1), 'input')
        cpp_fused_sum_view_0(tangents_1, buf2)
        buf3 = empty_strided_cpu((2, 8, 32), (256, 32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_12, permute_7, bmm_2], Original ATen: [aten.view, aten.transpose, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(div, (2, 8, 8), (64, 1, 8), 0), reinterpret_tensor(buf0, (2, 8, 32), (256, 32, 1), 0), out=buf3)
        assert_size_stride(permute_8, (2, 32, 8), (768, 1, 96), 'input')
        buf4 = empty_strided_cpu((2, 8, 8), (64, 8, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_12, bmm_3], Original ATen: [aten.view, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf0, (2, 8, 32), (256, 32, 1), 0), permute_8, out=buf4)
        del permute_8
        buf5 = empty_strided_cpu((2, 8, 1), (8, 1, 16), torch.float32)
        buf6 = div; del div  # reuse
        assert_size_stride(permute_9, (2, 32, 8), (768, 1, 96), 'input')
        cpp_fused__softmax_backward_data_mul_1(buf6, buf4, buf5)
        del buf4
        del buf5
        buf7 = reinterpret_tensor(buf0, (2, 32, 8), (256, 8, 1), 0); del buf0  # reuse
        # Topologically Sorted Source Nodes: [bmm_4], Original ATen: [aten.bmm]
        extern_kernels.bmm(permute_9, buf6, out=buf7)
        del permute_9
        assert_size_stride(permute_10, (2, 8, 32), (768, 96, 1), 'input')
        buf8 = empty_strided_cpu((2, 8, 32), (256, 32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [bmm_5], Original ATen: [aten.bmm]
        extern_kernels.bmm(buf6, permute_10, out=buf8)
        del buf6
        del permute_10
        buf12 = empty_strided_cpu((2, 8, 96), (768, 96, 1), torch.float32)
        buf9 = reinterpret_tensor(buf12, (2, 8, 32), (768, 96, 1), 0)  # alias
        buf10 = reinterpret_tensor(buf12, (2, 8, 32), (768, 96, 1), 32)  # alias
        buf11 = reinterpret_tensor(buf12, (2, 8, 32), (768, 96, 1), 64)  # alias
        assert_size_stride(primals_2, (96, 32), (32, 1), 'input')
        cpp_fused_cat_transpose_2(buf8, buf7, buf3, buf9, buf10, buf11)
        del buf10
        del buf11
        del buf3
        del buf7
        del buf9
        buf13 = reinterpret_tensor(buf8, (16, 32), (32, 1), 0); del buf8  # reuse
        # Topologically Sorted Source Nodes: [view_19, linear, permute_12, mm_2], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf12, (16, 96), (96, 1), 0), primals_2, out=buf13)
        del primals_2
        assert_size_stride(view, (16, 32), (32, 1), 'input')
        buf14 = empty_strided_cpu((96, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_19, permute_13, mm_3], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf12, (96, 16), (1, 96), 0), view, out=buf14)
        del view
        buf15 = empty_strided_cpu((1, 96), (96, 1), torch.float32)
        assert_size_stride(primals_1, (2, 8, 32), (256, 32, 1), 'input')
        buf18 = reinterpret_tensor(buf13, (2, 8, 32), (256, 32, 1), 0); del buf13  # reuse
        cpp_fused_add_mul_sigmoid_sigmoid_backward_sum_tanh_tanh_backward_view_3(buf18, buf12, primals_1, tangents_1, buf15)
        del buf12
        del primals_1
        del tangents_1
        return (buf18, buf14, reinterpret_tensor(buf15, (96, ), (1, ), 0), buf1, reinterpret_tensor(buf2, (32, ), (1, ), 0), )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    _shared_storage_6 = rand_strided((1536,), (1,), device='cpu', dtype=torch.float32)
    primals_1 = rand_strided((2, 8, 32), (256, 32, 1), device='cpu', dtype=torch.float32)
    primals_2 = rand_strided((96, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_4 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    view = rand_strided((16, 32), (32, 1), device='cpu', dtype=torch.float32)
    div = rand_strided((2, 8, 8), (64, 8, 1), device='cpu', dtype=torch.float32)
    view_8 = rand_strided((16, 32), (32, 1), device='cpu', dtype=torch.float32)
    permute_8 = torch.as_strided(_shared_storage_6, (2, 32, 8), (768, 1, 96))
    permute_9 = torch.as_strided(_shared_storage_6, (2, 32, 8), (768, 1, 96))
    permute_10 = torch.as_strided(_shared_storage_6, (2, 8, 32), (768, 96, 1))
    tangents_1 = rand_strided((2, 8, 32), (256, 32, 1), device='cpu', dtype=torch.float32)
    return [primals_1, primals_2, primals_4, view, div, view_8, permute_8, permute_9, permute_10, tangents_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))

