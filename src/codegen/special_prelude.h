// Special functions of generated code that neither libm nor CUDA's math library has, shared by
// the CPU and CUDA special headers (cpu/special.h, cuda/special.h): each defines COIL_FN and the
// math these use (exp, log, sqrt, erf, erfc, tan, trunc, copysign, fma, inf, nan and the f16 /
// bf16 conversions) and puts this text at its `// @special-helpers` line. The templates run in
// the type they are given: the CPU instantiates them in double for float operands too, CUDA in
// the operand's own type. Numerics follow PyTorch's (Cephes' expansions for the Bessel
// functions, its special values at 0, infinities and poles); the algorithms are written here.

// Sum of a Chebyshev series by Clenshaw's recurrence, the coefficients highest order first and
// the first term halved, as Cephes tabulates them.
template <typename T, int N> COIL_FN T chebyshev(T x, const double (&c)[N]) {
  T b0 = T(c[0]), b1 = T(0), b2 = T(0);
  for (int i = 1; i < N; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + T(c[i]);
  }
  return T(0.5) * (b0 - b2);
}

// e^-|x| I0(x): Chebyshev expansions on [0, 8] (in x/2 - 2) and (8, inf) (in 32/x - 2, times
// 1/sqrt(x)). Cephes' coefficients.
template <typename T> COIL_FN T bessel_i0e_impl(T x) {
  static const double kSmall[30] = {
      -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16, 1.71539128555513303061E-15,
      -1.16853328779934516808E-14, 7.67618549860493561688E-14, -4.85644678311192946090E-13, 2.95505266312963983461E-12,
      -1.72682629144155570723E-11, 9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
      -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7, 1.11738753912010371815E-6,
      -4.41673835845875056359E-6, 1.64484480707288970893E-5, -5.75419501008210370398E-5, 1.88502885095841655729E-4,
      -5.76375574538582365885E-4, 1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
      -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2, 1.71620901522208775349E-1,
      -3.04682672343198398683E-1, 6.76795274409476084995E-1};
  static const double kLarge[25] = {
      -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17, 3.46122286769746109310E-17,
      -2.82762398051658348494E-16, -3.42548561967721913462E-16, 1.77256013305652638360E-15, 3.81168066935262242075E-15,
      -9.55484669882830764870E-15, -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
      7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11, -3.14991652796324136454E-11,
      1.18891471078464383424E-11, 4.94060238822496958910E-10, 3.39623202570838634515E-9, 2.26666899049817806459E-8,
      2.04891858946906374183E-7, 2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
      8.04490411014108831608E-1};
  T a = abs(x);
  if (a <= T(8)) return chebyshev(a / T(2) - T(2), kSmall);
  return chebyshev(T(32) / a - T(2), kLarge) / sqrt(a);  // NaN takes this branch and stays NaN
}

// e^-|x| I1(x), odd: the small range's series is of I1(x) e^-x / x.
template <typename T> COIL_FN T bessel_i1e_impl(T x) {
  static const double kSmall[29] = {
      2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16, -1.10559694773538630805E-15,
      7.60068429473540693410E-15, -5.04218550472791168711E-14, 3.22379336594557470981E-13, -1.98397439776494371520E-12,
      1.17361862988909016308E-11, -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
      9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7, -8.56872026469545474066E-7,
      3.47025130813767847674E-6, -1.32731636560394358279E-5, 4.78156510755005422638E-5, -1.61760815825896745588E-4,
      5.12285956168575772895E-4, -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
      2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1, -1.76416518357834055153E-1,
      2.52587186443633654823E-1};
  static const double kLarge[25] = {
      7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17, -3.20952592199342395980E-17,
      2.96262899764595013876E-16, 3.30820231092092828324E-16, -1.88035477551078244854E-15, -3.81440307243700780478E-15,
      1.04202769841288027642E-14, 4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
      -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11, 3.25260358301548823856E-11,
      -1.89749581235054123450E-11, -5.58974346219658380687E-10, -3.83538038596423702205E-9, -2.63146884688951950684E-8,
      -2.51223623787020892529E-7, -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
      7.78576235018280120474E-1};
  T a = abs(x);
  T r = a <= T(8) ? chebyshev(a / T(2) - T(2), kSmall) * a : chebyshev(T(32) / a - T(2), kLarge) / sqrt(a);
  return x < T(0) ? -r : r;
}

// I0 and I1 as e^|x| times the scaled forms: at +-inf that is inf * 0, NaN, as in PyTorch.
template <typename T> COIL_FN T bessel_i0_impl(T x) { return exp(abs(x)) * bessel_i0e_impl(x); }
template <typename T> COIL_FN T bessel_i1_impl(T x) { return exp(abs(x)) * bessel_i1e_impl(x); }

// K0 and K1 (x > 0; inf at 0, NaN below): on (0, 2] a Chebyshev series in x^2 - 2 plus the
// logarithmic term through I0 / I1, beyond e^-x / sqrt(x) times a series in 8/x - 2. The scaled
// forms (e^x K) share the series, in the order of PyTorch's scaled kernels.
template <typename T> COIL_FN T bessel_k0_small(T x) {
  static const double kSmall[10] = {
      1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11, 1.90451637722020886025e-09,
      2.53479107902614945675e-07, 2.28621210311945178607e-05, 1.26461541144692592338e-03, 3.59799365153615016266e-02,
      3.44289899924628486886e-01, -5.35327393233902768720e-01};
  return chebyshev(x * x - T(2), kSmall);
}
template <typename T> COIL_FN T bessel_k0_large(T x) {
  static const double kLarge[25] = {
      5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17, -1.67823109680541210385e-16,
      5.51205597852431940784e-16, -1.84859337734377901440e-15, 6.34007647740507060557e-15, -2.22751332699166985548e-14,
      8.03289077536357521100e-14, -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
      1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10, -1.69753450938905987466e-09,
      8.57403401741422608519e-09, -4.66048989768794782956e-08, 2.76681363944501510342e-07, -1.83175552271911948767e-06,
      1.39498137188764993662e-05, -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
      2.44030308206595545468e+00};
  return chebyshev(T(8) / x - T(2), kLarge);
}
template <typename T> COIL_FN T bessel_k1_small(T x) {
  static const double kSmall[11] = {
      -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13, -1.41148839263352776110e-10,
      -2.21338763073472585583e-08, -2.43340614156596823496e-06, -1.73028895751305206302e-04, -6.97572385963986435018e-03,
      -1.22611180822657148235e-01, -3.53155960776544875667e-01, 1.52530022733894777053e+00};
  return chebyshev(x * x - T(2), kSmall);
}
template <typename T> COIL_FN T bessel_k1_large(T x) {
  static const double kLarge[25] = {
      -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17, 1.83809354436663880070e-16,
      -6.05704724837331885336e-16, 2.03870316562433424052e-15, -7.01983709041831346144e-15, 2.47715442448130437068e-14,
      -8.97670518232499435011e-14, 3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
      -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10, 2.01504975519703286596e-09,
      -1.03457624656780970260e-08, 5.74108412545004946722e-08, -3.50196060308781257119e-07, 2.40648494783721712015e-06,
      -1.93619797416608296024e-05, 1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
      2.72062619048444266945e+00};
  return chebyshev(T(8) / x - T(2), kLarge);
}
template <typename T> COIL_FN T bessel_k0_impl(T x) {
  if (x == T(0)) return inf<T>();
  if (x < T(0)) return nan<T>();
  if (x <= T(2)) return bessel_k0_small(x) - log(T(0.5) * x) * bessel_i0_impl(x);
  return exp(-x) * bessel_k0_large(x) / sqrt(x);
}
template <typename T> COIL_FN T bessel_k1_impl(T x) {
  if (x == T(0)) return inf<T>();
  if (x < T(0)) return nan<T>();
  if (x <= T(2)) return log(T(0.5) * x) * bessel_i1_impl(x) + bessel_k1_small(x) / x;
  return exp(-x) * bessel_k1_large(x) / sqrt(x);
}
template <typename T> COIL_FN T scaled_bessel_k0_impl(T x) {
  if (x == T(0)) return inf<T>();
  if (x < T(0)) return nan<T>();
  if (x <= T(2)) return (bessel_k0_small(x) - log(T(0.5) * x) * bessel_i0_impl(x)) * exp(x);
  return bessel_k0_large(x) / sqrt(x);
}
template <typename T> COIL_FN T scaled_bessel_k1_impl(T x) {
  if (x == T(0)) return inf<T>();
  if (x < T(0)) return nan<T>();
  if (x <= T(2)) return (log(T(0.5) * x) * bessel_i1_impl(x) + bessel_k1_small(x) / x) * exp(x);
  return bessel_k1_large(x) / sqrt(x);
}

// Sum of a polynomial, the coefficients highest order first (Cephes' polevl).
template <typename T, int N> COIL_FN T polevl(T x, const double (&c)[N]) {
  T r = T(0);
  for (int i = 0; i < N; ++i) r = r * x + T(c[i]);
  return r;
}

// digamma as PyTorch's CUDA kernel computes it, step for step in T (CUDA: the operand's type):
// -inf at +0 and +inf at -0, NaN at the negative integers; negative x reflect with pi / tan(pi
// r) in double (r: x's fraction); the recurrence psi(x) = psi(x + 1) - 1/x lifts x to 10,
// psi(10) exactly, beyond it the asymptotic series (Cephes' coefficients), summed last to first.
template <typename T> COIL_FN T digamma_impl(T x) {
  static const double kA[7] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                               -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                               8.33333333333333333333E-2};
  if (x == T(0)) return copysign(inf<T>(), -x);
  T result = T(0);
  if (x < T(0)) {
    if (x == trunc(x)) return nan<T>();
    double whole = static_cast<double>(x), fraction = whole - trunc(whole);
    result = static_cast<T>(-3.14159265358979323846 / tan(3.14159265358979323846 * fraction));
    x = T(1) - x;
  }
  while (x < T(10)) {
    result -= T(1) / x;
    x += T(1);
  }
  if (x == T(10)) return result + T(2.25175258906672110764);
  T y = T(0);
  if (x < T(1.0e17)) {
    T z = T(1) / (x * x);
    y = z * polevl(z, kA);
  }
  return log(x) - (T(0.5) / x) - y + result;
}

// trigamma (polygamma of order 1) as PyTorch's kernels: reflection below 1/2, six steps of the
// recurrence, then the asymptotic series.
template <typename T> COIL_FN T trigamma_impl(T x) {
  const T pi = T(3.14159265358979323846);
  T sign = T(1), result = T(0);
  if (x < T(0.5)) {
    sign = T(-1);
    T s = sin(pi * x);
    result -= (pi * pi) / (s * s);
    x = T(1) - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += T(1) / (x * x);
    x += T(1);
  }
  const T ixx = T(1) / (x * x);
  result += (T(1) + T(1) / (T(2) * x) + ixx * (T(1) / T(6) - ixx * (T(1) / T(30) - ixx * (T(1) / T(42))))) / x;
  return sign * result;
}

// Hurwitz zeta(x, q) = sum_k (k + q)^-x (Cephes' zeta, as PyTorch computes it): +inf at x = 1
// and at q a non-positive integer, NaN for x < 1 and for q < 0 with x not an integer; the sum's
// first ten terms or more (to a > 9), then the Euler-Maclaurin tail with B_2k / (2k)!.
template <typename T> COIL_FN T zeta_impl(T x, T q) {
  static const double kA[12] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
                                -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
                                1.8152105401943546773e17, -7.1661652561756670113e18};
  const T machep = T(1.11022302462515654042E-16);
  if (x == T(1)) return inf<T>();
  if (x < T(1)) return nan<T>();
  if (q <= T(0)) {
    if (q == floor(q)) return inf<T>();
    if (x != floor(x)) return nan<T>();
  }
  T s = pow(q, -x), a = q, b = T(0);
  int i = 0;
  while (i < 9 || a <= T(9)) {
    i += 1;
    a += T(1);
    b = pow(a, -x);
    s += b;
    if (-machep * s < b && b < machep * s) return s;
  }
  T w = a;
  s += b * w / (x - T(1));
  s -= T(0.5) * b;
  a = T(1);
  T k = T(0);
  for (int j = 0; j < 12; ++j) {
    a *= x + k;
    b /= w;
    T t = a * b / T(kA[j]);
    s = s + t;
    t = abs(t / s);
    if (t < machep) return s;
    k += T(1);
    a *= x + k;
    b /= w;
    k += T(1);
  }
  return s;
}

// polygamma of order n >= 2 (held in T): (-1)^(n+1) n! zeta(n + 1, x), n! as exp(lgamma(n + 1))
// in T and zeta in A (PyTorch's CPU kernel sums it in double for float, CUDA in the type itself).
template <typename T, typename A> COIL_FN T polygamma_impl(T n, T x) {
  const int order = static_cast<int>(n);
  T factor = (order % 2 ? T(1) : T(-1)) * exp(lgamma(n + T(1)));
  return factor * static_cast<T>(zeta_impl(static_cast<A>(order + 1), static_cast<A>(x)));
}

// The inverse of the normal distribution function (Cephes' ndtri): -inf at 0, inf at 1, NaN
// outside [0, 1]; a rational function of y - 1/2 in the middle, of 1 / sqrt(-2 log y) in the
// tails (two ranges), the upper tail by symmetry.
template <typename T> COIL_FN T ndtri_impl(T y0) {
  static const double kP0[5] = {-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
                                1.39312609387279679503E1, -1.23916583867381258016E0};
  static const double kQ0[9] = {1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
                                -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
                                1.59056225126211695515E1, -1.18331621121330003142E0};
  static const double kP1[9] = {4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
                                4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
                                -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4};
  static const double kQ1[9] = {1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
                                1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
                                -3.80806407691578277194E-2, -9.33259480895457427372E-4};
  static const double kP2[9] = {3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
                                1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
                                3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9};
  static const double kQ2[9] = {1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
                                2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
                                2.89247864745380683936E-6, 6.79019408009981274425E-9};
  if (y0 == T(0)) return -inf<T>();
  if (y0 == T(1)) return inf<T>();
  if (y0 < T(0) || y0 > T(1)) return nan<T>();
  const T exp_minus_2 = T(0.13533528323661269189);
  bool lower = true;
  T y = y0;
  if (y > T(1) - exp_minus_2) {
    y = T(1) - y;
    lower = false;
  }
  if (y > exp_minus_2) {
    y = y - T(0.5);
    const T y2 = y * y;
    T x = y + y * (y2 * polevl(y2, kP0) / polevl(y2, kQ0));
    return x * T(2.50662827463100050242E0);
  }
  T x = sqrt(T(-2) * log(y));
  const T x0 = x - log(x) / x;
  const T z = T(1) / x;
  T x1 = x < T(8) ? z * polevl(z, kP1) / polevl(z, kQ1) : z * polevl(z, kP2) / polevl(z, kQ2);
  x = x0 - x1;
  return lower ? -x : x;
}

// Airy's Ai (Cephes' airy as PyTorch has it): NaN at +-inf, 0 beyond 103.892; below -2.09 the
// oscillating asymptotic form, from 2.09 the decaying one, between them the Maclaurin series.
template <typename T> COIL_FN T airy_ai_impl(T x) {
  static const double kAN[8] = {3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
                                1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
                                1.40264691163389668864e+01, 9.99999999999999995305e-01};
  static const double kAD[8] = {5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
                                1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
                                1.40959135607834029598e+01, 1.00000000000000000470e+00};
  static const double kAFN[9] = {-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
                                 -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
                                 -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
  static const double kAFD[9] = {1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
                                 9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
                                 4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07};
  static const double kAGN[11] = {1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
                                  9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
                                  5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
                                  8.11789239554389293311e-08, 3.41551784765923618484e-10};
  static const double kAGD[10] = {9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
                                  5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
                                  4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
                                  4.91834570062930015649e-09};
  const T one_over_sqrt_pi = T(5.64189583547756286948e-01);
  if (isinf(x)) return nan<T>();
  if (x > T(103.892)) return T(0);
  if (x < T(-2.09)) {
    T z = T(1) / (T(-2) * x * sqrt(-x) / T(3));
    T zz = z * z;
    T afn = polevl(zz, kAFN), afd = polevl(zz, kAFD), agn = polevl(zz, kAGN), agd = polevl(zz, kAGD);
    T t = T(-2) * x * sqrt(-x) / T(3) + T(0.25) * T(3.14159265358979323846);
    return one_over_sqrt_pi / sqrt(sqrt(-x)) * (sin(t) * (T(1) + z * z * afn / afd) - cos(t) * (z * agn / agd));
  }
  if (x >= T(2.09)) {
    T zeta = T(2) * x * sqrt(x) / T(3);
    T an = polevl(T(1) / zeta, kAN), ad = polevl(T(1) / zeta, kAD);
    return one_over_sqrt_pi * (an / ad) / (T(2) * sqrt(sqrt(x)) * exp(zeta));
  }
  const T eps = T(sizeof(T) == 4 ? 1.1920928955078125e-07 : 2.220446049250313e-16);
  T f = T(1), g = x, k = T(1), m = T(1), n = x, t = T(1), z = x * x * x;
  while (t > eps) {
    m *= z;
    k += T(1);
    m /= k;
    n *= z;
    k += T(1);
    n /= k;
    m /= k;
    f += m;
    k += T(1);
    n /= k;
    g += n;
    t = abs(m / f);
  }
  return T(0.355028053887817239260) * f - T(0.258819403792806798405) * g;
}

// sin(x) / x, by its Maclaurin series below |x| = 1/2; 0 at +-inf.
template <typename T> COIL_FN T spherical_bessel_j0_impl(T x) {
  if (isinf(x)) return T(0);
  if (abs(x) < T(0.5)) {
    T xx = x * x;
    return T(1) + xx * (T(-1) / T(6) + xx * (T(1) / T(120) + xx * (T(-1) / T(5040) + xx * (T(1) / T(362880) +
                    xx * (T(-1) / T(39916800) + xx * (T(1) / T(6227020800.0)))))));
  }
  return sin(x) / x;
}

// erfinv: a rational first guess (Pavlis' erfinv coefficients, central range |y| <= 0.7, tails
// in sqrt(-log((1 - |y|) / 2))), then two Newton steps. Near 0 the step solves erf(x) = y; in
// the tails it solves erfc(|x|) = 1 - |y|, which is exact there where erf(x) - y cancels.
template <typename T> COIL_FN T erfinv_impl(T y) {
  T a = abs(y);
  if (!(a <= T(1))) return nan<T>();  // outside [-1, 1], and NaN
  if (a == T(1)) return copysign(inf<T>(), y);
  T x;
  if (a <= T(0.7)) {
    T z = y * y;
    T num = ((T(-0.140543331) * z + T(0.914624893)) * z + T(-1.645349621)) * z + T(0.886226899);
    T den = (((T(0.012229801) * z + T(-0.329097515)) * z + T(1.442710462)) * z + T(-2.118377725)) * z + T(1);
    x = y * num / den;
  } else {
    T z = sqrt(-log((T(1) - a) / T(2)));
    T num = ((T(1.641345311) * z + T(3.429567803)) * z + T(-1.624906493)) * z + T(-1.970840454);
    T den = (T(1.637067800) * z + T(3.543889200)) * z + T(1);
    x = copysign(num / den, y);
  }
  const T two_over_sqrt_pi = T(1.12837916709551257390);
  for (int step = 0; step < 2; ++step) {
    if (a <= T(0.5)) {
      x -= (erf(x) - y) / (two_over_sqrt_pi * exp(-x * x));
    } else {
      T t = abs(x);
      t += (erfc(t) - (T(1) - a)) / (two_over_sqrt_pi * exp(-t * t));
      x = copysign(t, y);
    }
  }
  return x;
}

// erfcx(x) = e^(x^2) erfc(x), in double. x^2 is split exactly (x^2 = h + l by an FMA) so e^(x^2)
// carries no error from it. Below x = 12 the product, from 12 the asymptotic series
// 1/(x sqrt(pi)) * sum (-1)^k (2k-1)!! / (2x^2)^k (12 terms reach double precision there);
// negative x by erfcx(x) = 2 e^(x^2) - erfcx(-x), inf below -26.7 as in PyTorch.
COIL_FN double exp_of_square(double x) {
  double h = x * x;
  return exp(h) * (1.0 + fma(x, x, -h));
}
COIL_FN double erfcx_nonnegative(double x) {
  if (x < 12.0) return exp_of_square(x) * erfc(x);
  double z = 0.5 / (x * x), s = 1.0;
  for (int k = 23; k >= 1; k -= 2) s = 1.0 - k * z * s;  // 1 - z(1 - 3z(1 - 5z(...)))
  return s / (x * 1.77245385090551602730);
}
COIL_FN double erfcx_impl(double x) {
  if (x >= 0.0 || x != x) return erfcx_nonnegative(x);
  if (x < -26.7) return inf<double>();
  return 2.0 * exp_of_square(x) - erfcx_nonnegative(-x);
}

// nextafter one step of the 16-bit format itself (x holds an f16 or bf16 value): PyTorch steps
// f16 and bf16 tensors by their own ulp.
COIL_FN uint16_t next_bits(float x, float toward, uint16_t bits) {
  if ((bits & 0x7fffu) == 0) return static_cast<uint16_t>(toward > x ? 0x0001u : 0x8001u);
  return static_cast<uint16_t>((x < toward) == (x > 0.0f) ? bits + 1u : bits - 1u);
}
COIL_FN float nextafter_f16(float x, float toward) {
  if (x != x || toward != toward) return x + toward;
  if (x == toward) return toward;
  return f16_to_f32(next_bits(x, toward, f32_to_f16(x)));
}
COIL_FN float nextafter_bf16(float x, float toward) {
  if (x != x || toward != toward) return x + toward;
  if (x == toward) return toward;
  return bf16_to_f32(next_bits(x, toward, f32_to_bf16(x)));
}

// Integer shifts with PyTorch's rules for amounts outside [0, bits): 0 for a left shift, the
// sign fill for a right one.
template <typename T> COIL_FN T shift_left(T a, T b) {
  if (static_cast<int64_t>(b) < 0 || static_cast<int64_t>(b) >= static_cast<int64_t>(sizeof(T) * 8)) return T(0);
  return static_cast<T>(static_cast<uint64_t>(a) << static_cast<int>(b));
}
template <typename T> COIL_FN T shift_right(T a, T b) {
  if (static_cast<int64_t>(b) < 0 || static_cast<int64_t>(b) >= static_cast<int64_t>(sizeof(T) * 8))
    return static_cast<int64_t>(a) < 0 ? T(-1) : T(0);
  return static_cast<T>(a >> static_cast<int>(b));
}

// gcd and lcm as PyTorch computes them: Euclid on absolute values taken in the element type
// (|-128| is -128 in i8), lcm = |a / gcd * b| in C++'s promoted type, wrapping on overflow.
template <typename T> COIL_FN T abs_wrap(T v) {
  return static_cast<T>(v < 0 ? 0ull - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
}
template <typename T> COIL_FN T gcd(T a, T b) {
  T x = abs_wrap(a), y = abs_wrap(b);
  while (x != 0) {
    T c = x;
    x = static_cast<T>(y % x);
    y = c;
  }
  return y;
}
template <typename T> COIL_FN T lcm(T a, T b) {
  T g = gcd(a, b);
  if (g == 0) return T(0);
  auto q = a / g;  // promoted as C++ promotes: small types compute in int
  auto m = static_cast<decltype(q)>(static_cast<uint64_t>(q) * static_cast<uint64_t>(+b));
  return static_cast<T>(abs_wrap(m));
}
